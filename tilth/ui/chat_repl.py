"""The terminal front end of a chat: the input loop, slash commands and the rewind picker.

Interactive (stdin a terminal): a prompt_toolkit prompt with history and multi-line
input (Enter sends, Esc Enter adds a line; pasted text keeps its lines), ``Esc Esc`` on
an empty prompt opens the picker, Ctrl-C cancels the turn in flight (at the prompt it
clears the line), Ctrl-D leaves. Turns run on a worker thread so Ctrl-C reaches the main
thread at once; a risky ``bash`` command's ``[y/N]`` is asked on the main thread too.

Scriptable (stdin not a terminal): one prompt or slash command per line, arguments
inline, errors as lines, the end of input ends the chat.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tilth.chat import CancelToken, ChatEngine
from tilth.chat.commands import Command, help_text, is_command, parse
from tilth.errors import Aborted, TilthError, UsageError
from tilth.timeline.record.checkpoints import Checkpoint
from tilth.timeline.rewind.plan import RewindPlan
from tilth.ui.chat_view import ChatView, status_text, terminal_safe
from tilth.ui.io import IO

PICKER = "\x00tilth-picker"
CANCEL_WAIT_SECONDS = 3.0
ACTIONS = (
    ("both", "code+conversation"),
    ("conversation", "conversation"),
    ("code", "code"),
    ("fork", "fork from here"),
    ("from", "summarize from here"),
    ("up-to", "summarize up to here"),
    ("cancel", "cancel"),
)


class ChatRepl:
    """Reads prompts and commands, drives the engine, prints through ``view``."""

    def __init__(
        self,
        engine: ChatEngine,
        io: IO,
        view: ChatView,
        *,
        interactive: bool,
        history: Path | None = None,
        terminal: tuple[Any, Any] | None = None,
    ) -> None:
        self.engine = engine
        self.io = io
        self.view = view
        self.interactive = interactive
        self.history = history
        self.terminal = terminal
        """prompt_toolkit ``(input, output)`` to use instead of the process's terminal."""
        self.prefill = ""
        self._worker: threading.Thread | None = None
        self._done = threading.Event()
        self._requests: queue.Queue[tuple[str, str, queue.Queue[bool]]] = queue.Queue()
        self._prompt: Any = None
        self._turns = len(engine.turns())

    # ---- the loops -------------------------------------------------------------------------------
    def run(self) -> int:
        """Until Ctrl-D, ``/exit`` or the end of input; returns the exit code (0)."""
        try:
            if self.interactive:
                self._interactive_loop()
            else:
                for raw in self.io.stdin:
                    line = raw.rstrip("\r\n")
                    if line.strip() and not self.handle(line):
                        break
        finally:
            self._wait_worker()
        return 0

    def _interactive_loop(self) -> None:
        while True:
            try:
                text = self._read()
            except EOFError:
                return
            except KeyboardInterrupt:
                continue
            if text == PICKER:
                self._guarded(self._picker)
                continue
            if text.strip() and not self.handle(text):
                return

    def handle(self, line: str) -> bool:
        """One prompt or command; False when the chat should end."""
        if is_command(line):
            try:
                command = parse(line)
            except TilthError as exc:
                self._error(exc)
                return True
            if command.name == "exit":
                return False
            self._guarded(lambda: self._command(command))
            return True
        self._guarded(lambda: self._send(line))
        return True

    def _guarded(self, action: Callable[[], None]) -> None:
        try:
            action()
        except Aborted as exc:
            self.io.dim(str(exc))
        except TilthError as exc:
            self._error(exc)
        except KeyboardInterrupt:
            self.io.dim("cancelled")

    def _error(self, exc: TilthError) -> None:
        self.view.end_block()
        self.io.error(exc.message, exc.hint)

    # ---- input -----------------------------------------------------------------------------------
    def _session(self) -> Any:
        if self._prompt is None:
            from prompt_toolkit import PromptSession
            from prompt_toolkit.history import FileHistory, InMemoryHistory
            from prompt_toolkit.key_binding import KeyBindings

            bindings = KeyBindings()

            @bindings.add("escape", "escape")
            def _picker(event: Any) -> None:
                if not event.current_buffer.text.strip():
                    event.app.exit(result=PICKER)

            # Enter sends. Ctrl-J sends too: lines typed ahead while a turn runs reach the
            # prompt through the terminal's line discipline, which turns Enter into Ctrl-J.
            @bindings.add("enter")
            @bindings.add("c-j")
            def _send(event: Any) -> None:
                event.current_buffer.validate_and_handle()

            @bindings.add("escape", "enter")
            def _newline(event: Any) -> None:
                event.current_buffer.insert_text("\n")

            history: Any = InMemoryHistory()
            if self.history is not None:
                try:
                    self.history.parent.mkdir(parents=True, exist_ok=True)
                    history = FileHistory(str(self.history))
                except OSError:
                    pass
            pt_input, pt_output = self.terminal or (None, None)
            self._prompt = PromptSession(
                input=pt_input,
                output=pt_output,
                history=history,
                multiline=True,
                key_bindings=bindings,
                bottom_toolbar=self._toolbar,
                prompt_continuation="… ",
            )
        return self._prompt

    def _toolbar(self) -> str:
        return (
            f" {status_text(self._turns + 1, self.engine.tokens_used)} · "
            "Esc Esc rewind · /help · Ctrl-D leave"
        )

    def _read(self) -> str:
        default, self.prefill = self.prefill, ""
        return str(self._session().prompt("› ", default=default))

    def _ask(self, question: str) -> str:
        """A one-line answer on the main thread (no history); Ctrl-C/Ctrl-D answer ''."""
        if not self.interactive:
            return ""
        from prompt_toolkit import prompt

        try:
            return str(prompt(question)).strip()
        except (EOFError, KeyboardInterrupt):
            return ""

    def _yes(self, question: str) -> bool:
        return self._ask(f"{question} [y/N] ").lower() in ("y", "yes")

    # ---- one turn --------------------------------------------------------------------------------
    def _send(self, text: str) -> None:
        self._wait_worker()
        token = CancelToken()
        box: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                box["result"] = self.engine.send(text, token)
            except BaseException as exc:  # handed to the main thread below
                box["error"] = exc
            finally:
                done.set()

        worker = threading.Thread(target=work, name="tilth-chat-turn", daemon=True)
        self._worker, self._done = worker, done
        worker.start()
        self._follow(done, token)
        self._turns = len(self.engine.turns())
        error = box.get("error")
        if isinstance(error, TilthError):
            raise error
        if error is not None:
            self.view.end_block()
            self.io.error(f"unexpected {type(error).__name__}: {error}", "the chat goes on")

    def _follow(self, done: threading.Event, token: CancelToken) -> None:
        """Wait for the turn, answering its questions; Ctrl-C cancels it.

        An ``Event`` is waited on, not the thread: a ``join`` interrupted by Ctrl-C can
        leave ``is_alive()`` False while the thread still runs.
        """
        deadline: float | None = None
        while not done.is_set():
            try:
                self._serve_requests()
                done.wait(0.05)
            except KeyboardInterrupt:
                if deadline is not None:
                    break
                token.cancel()
                self.view.end_block()
                self.io.dim("cancelling the turn...")
                deadline = time.monotonic() + CANCEL_WAIT_SECONDS
            if deadline is not None and time.monotonic() > deadline:
                break
        if not done.is_set():
            self.io.dim("the cancelled model call is still finishing; its reply will be dropped")
        self._refuse_pending()

    def _wait_worker(self) -> None:
        done = self._done
        if self._worker is not None and not done.is_set():
            self.io.dim("waiting for the cancelled turn to finish...")
            while not done.is_set():
                self._refuse_pending()
                done.wait(0.1)
        self._worker = None

    def confirm(self, command: str, reason: str) -> bool:
        """The engine's confirm callback (worker thread): ask on the main thread, wait."""
        if not self.interactive:
            return False
        answer: queue.Queue[bool] = queue.Queue(maxsize=1)
        self._requests.put((command, reason, answer))
        return answer.get()

    def _serve_requests(self) -> None:
        while True:
            try:
                command, reason, answer = self._requests.get_nowait()
            except queue.Empty:
                return
            self.view.end_block()
            self.io.say(f"The guard flags this command ({reason}):", style="yellow")
            self.io.say(f"  {terminal_safe(command)}")
            answer.put(self._yes("Run it?"))

    def _refuse_pending(self) -> None:
        while True:
            try:
                _, _, answer = self._requests.get_nowait()
            except queue.Empty:
                return
            answer.put(False)

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

    def _show(self, plan: RewindPlan) -> bool:
        """Show a plan; on a terminal, ask before it runs."""
        self.view.end_block()
        self.io.say(terminal_safe(plan.render()))
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
        target = self.engine.turn(turn)
        self.io.say(
            f"fork: a new chat session whose directory and conversation are those of just "
            f"before turn {turn} ({terminal_safe(target.label)}), in a directory of its own; "
            "this chat and its directory stay as they are"
        )
        if self.interactive and not self._yes("Go ahead?"):
            raise Aborted("cancelled; nothing was changed")
        result = self.engine.fork(turn)
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
        plan = self.engine.plan_summarize(turn, direction)
        self.io.say(
            f"summarize: {plan['messages']} message(s) ({plan['prompts']} of them yours) "
            f"{where} just before turn {turn} are replaced by one summary the model writes; "
            "files are not touched and later rewinds still work"
        )
        if self.interactive and not self._yes("Go ahead?"):
            raise Aborted("cancelled; nothing was changed")
        result = self.engine.summarize(turn, direction)
        self.io.ok(f"summarized {result['replaced']} message(s) {where} turn {turn}")

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
