"""The chat's slash commands and its rewind picker, on a terminal or from piped lines.

Every go-back shows its plan first (on a terminal it then asks ``Go ahead? [y/N]``); with
stdin not a terminal a command needs its arguments inline and runs as written.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tilth.chat.commands import Command, help_text
from tilth.errors import UsageError
from tilth.timeline.record.checkpoints import Checkpoint
from tilth.timeline.rewind.plan import RewindPlan
from tilth.timeline.rewind.summarize import SummaryPlan
from tilth.ui.chat_view import terminal_safe

if TYPE_CHECKING:
    from tilth.chat import ChatEngine
    from tilth.ui.chat_view import ChatView
    from tilth.ui.io import IO

ACTIONS = (
    ("both", "code+conversation"),
    ("conversation", "conversation"),
    ("code", "code"),
    ("fork", "fork from here"),
    ("from", "summarize from here"),
    ("up-to", "summarize up to here"),
    ("cancel", "cancel"),
)


class ChatCommands:
    """The command half of ``ChatRepl`` (mixed in; uses its engine, IO, view and prompts)."""

    engine: ChatEngine
    io: IO
    view: ChatView
    interactive: bool
    prefill: str
    _turns: int

    def _ask(self, question: str, *, interrupt: bool = False) -> str:
        raise NotImplementedError

    def _yes(self, question: str) -> bool:
        return self._ask(f"{question} [y/N] ").lower() in ("y", "yes")

    # ---- commands --------------------------------------------------------------------------------
    def _needs_terminal(self, usage: str) -> None:
        if not self.interactive:
            raise UsageError(
                f"{usage.split()[0]} needs its arguments when stdin is not a terminal",
                hint=f"usage: {usage}",
            )

    def _command(self, command: Command) -> None:
        name = command.name
        if name == "help":
            self.io.say("commands:\n" + help_text())
            self.io.say("keys: Esc Esc (empty prompt) rewind picker · Ctrl-C cancel · Ctrl-D leave")
        elif name == "checkpoints":
            self._list_turns()
        elif name == "undo":
            self._undo()
        elif name == "rewind":
            if command.turn is None:
                self._needs_terminal("/rewind N [code|conversation|both]")
                self._picker()
            else:
                self._rewind(command.turn, command.scope or "both")
        elif name == "fork":
            if command.turn is None:
                self._needs_terminal("/fork N")
                turn = self._pick_turn("Fork from which turn?")
                if turn is not None:
                    self._fork(turn)
            else:
                self._fork(command.turn)
        elif name == "summarize":
            if command.turn is None or command.direction is None:
                self._needs_terminal("/summarize N from|up-to")
                self._picker()
            else:
                self._summarize(command.turn, command.direction)

    def _list_turns(self) -> None:
        turns = self.engine.turns()
        if not turns:
            self.io.say("no turns yet")
            return
        for number, cp in enumerate(turns, 1):
            self.io.say(self._turn_line(number, cp))

    @staticmethod
    def _turn_line(number: int, cp: Checkpoint) -> str:
        files = ", ".join(cp.files_changed[:3]) if cp.files_changed else "no files changed"
        if len(cp.files_changed) > 3:
            files += f" +{len(cp.files_changed) - 3}"
        when = cp.ts[11:19] if len(cp.ts) >= 19 else cp.ts
        return f"  {number:>3}  {when}  {terminal_safe(cp.label)}  [{files}]  ({cp.id})"

    def _show(self, plan: RewindPlan | SummaryPlan) -> bool:
        """Show a plan; on a terminal, ask before it runs."""
        self.view.end_block()
        text = plan.render("`/undo`") if isinstance(plan, RewindPlan) else plan.render()
        self.io.say(terminal_safe(text))
        return not self.interactive or self._yes("Go ahead?")

    def _rewind(self, turn: int, scope: str) -> None:
        result = self.engine.rewind(turn, scope, show=self._show)
        self._turns = len(self.engine.turns())
        restored = sum(1 for action, _ in result["files"] if action == "restore")
        deleted = len(result["files"]) - restored
        self.io.ok(
            f"rewound to just before turn {turn} ({scope}): "
            f"{restored} file(s) restored, {deleted} deleted"
        )
        prompt = result.get("prompt")
        if prompt:
            if self.interactive:
                self.prefill = prompt
                self.io.dim(f"the prompt of turn {turn} is back in the input box")
            else:
                self.io.say(f"prompt of turn {turn}: {terminal_safe(prompt.splitlines()[0])}")

    def _undo(self) -> None:
        result = self.engine.undo(show=self._show)
        self._turns = len(self.engine.turns())
        self.io.ok(f"undone: back to the state before the last go-back ({result['target']})")

    def _fork(self, turn: int) -> None:
        result = self.engine.fork(turn, show=self._show)
        self.io.ok(f"forked into session {result['session_id']}")
        directory = Path(result["directory"])
        self.io.say(f"directory: {directory}")
        listed = sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*"))
        files = [p for p in listed if (directory / p).is_file()]
        shown = ", ".join(files[:20]) + (f" +{len(files) - 20}" if len(files) > 20 else "")
        self.io.say(f"files: {shown or '(none)'}")
        self.io.say(f"continue it with: tilth chat --resume {result['session_id']}")

    def _summarize(self, turn: int, direction: str) -> None:
        where = "up to" if direction == "up-to" else "from"
        result = self.engine.summarize(turn, direction, show=self._show)
        self.io.ok(f"summarized {result['replaced']} message(s) {where} turn {turn}")
        # what the model wrote now stands for those messages: the person should read it
        self.io.dim(terminal_safe(str(result.get("summary") or "")))

    # ---- the picker ------------------------------------------------------------------------------
    def _pick_number(self, question: str, high: int) -> int | None:
        while True:
            answer = self._ask(question)
            if answer in ("", "0", "q"):
                return None
            if answer.isdigit() and 1 <= int(answer) <= high:
                return int(answer)
            self.io.say(f"choose 1-{high}, or 0 to cancel", style="yellow")

    def _pick_turn(self, header: str) -> int | None:
        turns = self.engine.turns()
        if not turns:
            self.io.say("no turns yet: nothing to go back to")
            return None
        self.io.say(f"{header} (each is the instant just before its prompt)")
        for number in range(len(turns), 0, -1):
            self.io.say(self._turn_line(number, turns[number - 1]))
        self.io.say("    0  cancel")
        return self._pick_number("turn> ", len(turns))

    def _picker(self) -> None:
        """Esc Esc or /rewind: a turn, then what to do with it (each shows its plan first)."""
        turn = self._pick_turn("Go back to which turn?")
        if turn is None:
            return
        label = terminal_safe(self.engine.turn(turn).label)
        self.io.say(f"turn {turn} ({label}):")
        for number, (_, text) in enumerate(ACTIONS, 1):
            self.io.say(f"  {number}) {text}")
        choice = self._pick_number("> ", len(ACTIONS))
        action = ACTIONS[choice - 1][0] if choice else "cancel"
        if action == "cancel":
            return
        if action in ("both", "conversation", "code"):
            self._rewind(turn, action)
        elif action == "fork":
            self._fork(turn)
        else:
            self._summarize(turn, action)
