"""The chat's slash commands and its rewind picker, on a terminal or from piped lines.

Every go-back shows its plan first (on a terminal it then asks ``Go ahead? [y/N]``); with
stdin not a terminal a command needs its arguments inline and runs as written.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilth import Checkpoint, RewindPlan
from tilth.chat import Command, help_text
from tilth.errors import SessionCorrupt, TilthError, UsageError
from tilth.timeline import SummaryPlan, read_checkpoint
from tilth.ui.chat.view import terminal_safe
from tilth.ui.list_picker import Row, pick

if TYPE_CHECKING:
    from tilth.chat import ChatEngine
    from tilth.ui.chat.view import ChatView
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


@functools.lru_cache(maxsize=8192)
def _turn_row(number: int, ts: str, label: str, changed: tuple[str, ...]) -> str:
    """Kept once made: a long chat's picker opens without redoing a thousand rows."""
    files = f"{len(changed)} file(s): " + ", ".join(changed[:3])
    if len(changed) > 3:
        files += f" +{len(changed) - 3}"
    if not changed:
        files = "no files changed"
    when = ts[11:16] if len(ts) >= 16 else ts
    lines = terminal_safe(label).strip().splitlines()
    prompt = lines[0] if lines else ""
    prompt = prompt if len(prompt) <= 60 else prompt[:59] + "…"
    return f"{number:>4}  {when}  {prompt}  · {files}"


def summary_words(plan: SummaryPlan) -> str:
    """A summarize plan in words, saying plainly that ``/undo`` does not take it back."""
    return (
        f"{plan.render()}\n"
        "This cannot be undone with /undo: the summary replaces those messages in what the "
        "model reads from now on. (They are kept in the session, so a later rewind to a turn "
        "before the summary still restores them.)"
    )


class ChatCommands:
    """The command half of ``ChatRepl`` (mixed in; uses its engine, IO, view and prompts)."""

    engine: ChatEngine
    io: IO
    view: ChatView
    interactive: bool
    prefill: str
    terminal: tuple[Any, Any] | None
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

    @staticmethod
    def _turn_row(number: int, cp: Checkpoint) -> str:
        """A picker row: number, time, the prompt's first line, files changed."""
        return _turn_row(number, cp.ts, cp.label, tuple(cp.files_changed))

    def _show(self, plan: RewindPlan | SummaryPlan) -> bool:
        """Show a plan; on a terminal, ask before it runs."""
        self.view.end_block()
        text = plan.render("`/undo`") if isinstance(plan, RewindPlan) else summary_words(plan)
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
        said: dict[str, str] = {}

        def show(plan: RewindPlan) -> bool:
            said["what"] = self._undo_words(plan)
            self.io.say(f"/undo undoes {said['what']}", style="bold")
            return self._show(plan)

        self.engine.undo(show=show)
        self._turns = len(self.engine.turns())
        self.io.ok(f"undone: {said.get('what', 'the last go-back')}")

    def _turn_of(self, target: str, every: list[Checkpoint], point: Checkpoint) -> int | None:
        """The turn number of checkpoint ``target``, kept or in ``point``'s undo archive."""
        aimed = next((cp for cp in every if cp.id == target), None)
        if aimed is None and point.archive and target.startswith("cp-"):
            archived = self.engine.session.dir / point.archive / "checkpoints" / f"{target}.json"
            try:
                aimed = read_checkpoint(self.engine.session, archived)
            except (OSError, ValueError, TypeError, SessionCorrupt):
                aimed = None
        return aimed.turn if aimed is not None and aimed.kind == "turn" else None

    def _undo_words(self, plan: RewindPlan) -> str:
        """What the last go-back was, in words: ``the rewind to just before turn 3 (13:45)``.

        Warns when the conversation was summarized since: that summary goes too.
        """
        every = self.engine.controller.checkpoints().checkpoints
        points = [cp for cp in every if cp.is_before]
        point = next((cp for cp in points if cp.id == plan.target), points[-1] if points else None)
        if point is None:
            return "the last go-back"
        verb, _, target = point.label.removeprefix("before ").partition(" to ")
        turn = self._turn_of(target, every, point)
        where = f"just before turn {turn}" if turn else target
        when = point.ts[11:16]
        words = f"the {verb} to {where} (made at {when} UTC)" if target else point.label
        later = self.engine.session.events.read(point.event_offset).events
        if any(event.type == "summarize" for event in later):
            words += "; the summary made since then goes too (a summary is not undone on its own)"
        return words

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
        """A turn from the full-screen list (the newest next to the prompt); None: cancelled."""
        turns = self.engine.turns()
        if not turns:
            self.io.say("no turns yet: nothing to go back to")
            return None
        self.view.end_block()
        rows = [Row(n, n, self._turn_row(n, cp)) for n, cp in enumerate(turns, 1)]

        def prompt_of(row: Row) -> str:
            cp = turns[int(row.key) - 1]
            files = ", ".join(cp.files_changed) or "no files changed"
            return f"turn {row.key} · {cp.ts[:19].replace('T', ' ')} UTC · {files}\n{cp.label}"

        turn = pick(
            rows,
            title=f"{header} (each is the instant just before its prompt)",
            detail=prompt_of,
            detail_rows=6,
            terminal=self.terminal,
        )
        if turn is None:
            self.io.dim("cancelled; nothing was changed")
        return None if turn is None else int(turn)

    def _plan_text(self, turn: int, action: str) -> str:
        """What ``action`` on ``turn`` would change, in words (nothing is written)."""
        try:
            if action in ("both", "conversation", "code"):
                return self.engine.plan_rewind(turn, action).render("`/undo`")
            if action == "fork":
                return self.engine.plan_fork(turn).render("`/undo`")
            if action in ("from", "up-to"):
                return summary_words(self.engine.plan_summarize(turn, action))
        except TilthError as exc:
            return f"{exc.message}" + (f"\n{exc.hint}" if exc.hint else "")
        return "nothing changes"

    def _picker(self) -> None:
        """Esc Esc or /rewind: a turn, then what to do with it, each action's plan in view."""
        turn = self._pick_turn("Go back to which turn?")
        if turn is None:
            return
        label = terminal_safe(self.engine.turn(turn).label).splitlines()[0][:80]
        plans: dict[str, str] = {}

        def plan(row: Row) -> str:
            if row.key not in plans:
                plans[row.key] = self._plan_text(turn, str(row.key))
            return plans[row.key]

        rows = [Row(key, n, f"{n}) {text}") for n, (key, text) in enumerate(ACTIONS, 1)]
        action = pick(
            rows,
            title=f"turn {turn} ({label}): what to go back to",
            detail=plan,
            detail_rows=16,
            start=0,
            terminal=self.terminal,
        )
        if action is None or action == "cancel":
            self.io.dim("cancelled; nothing was changed")
            return
        self.io.say(f"turn {turn} ({label}): {dict(ACTIONS)[action]}")
        if action in ("both", "conversation", "code"):
            self._rewind(turn, action)
        elif action == "fork":
            self._fork(turn)
        else:
            self._summarize(turn, action)
