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
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from tilth.chat import CancelToken, ChatEngine, is_command, parse
from tilth.errors import Aborted, TilthError
from tilth.stops import stop_signals_interrupt
from tilth.ui.chat.commands import ChatCommands
from tilth.ui.chat.view import ChatView, status_text, terminal_safe
from tilth.ui.io import IO

PICKER = "\x00tilth-picker"
CANCEL_WAIT_SECONDS = 3.0


class ChatRepl(ChatCommands):
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
        # Set when a request is queued: the main thread polls this flag (no lock taken), not
        # the queue, whose lock a Ctrl-C landing mid-``get`` could leave held.
        self._requested = threading.Event()
        self._prompt: Any = None
        self._turns = len(engine.turns())
        self.leaving: str | None = None
        """Why a signal (SIGTERM, SIGHUP) ended the chat; None while it goes on."""

    # ---- the loops -------------------------------------------------------------------------------
    def run(self) -> int:
        """Until Ctrl-D, ``/exit``, the end of input or SIGTERM/SIGHUP; returns the exit code
        (0; 130 when a signal ended it: ``leaving`` then says which)."""
        try:
            with self._stop_signals():
                if self.interactive:
                    self._interactive_loop()
                else:
                    self._piped_loop()
        except KeyboardInterrupt:
            if self.leaving is None:
                raise
        finally:
            self._wait_worker()
        return 130 if self.leaving else 0

    def _stop_signals(self) -> AbstractContextManager[None]:
        """SIGTERM and SIGHUP end the chat as Ctrl-C then Ctrl-D would: a running turn is
        cancelled at its next safe point, then the loop ends (``leaving`` says why)."""

        def leave(words: str) -> None:
            self.leaving = words

        return stop_signals_interrupt(leave)

    def _piped_loop(self) -> None:
        for raw in self.io.stdin:
            line = raw.rstrip("\r\n")
            if line.strip() and not self.handle(line):
                return
            if self.leaving:
                return

    def _interactive_loop(self) -> None:
        while True:
            try:
                text = self._read()
            except EOFError:
                return
            except KeyboardInterrupt:
                if self.leaving:
                    return
                continue
            if text == PICKER:
                self._guarded(self._picker)
                continue
            if (text.strip() and not self.handle(text)) or self.leaving:
                return

    def handle(self, line: str) -> bool:
        """One prompt or command; False when the chat should end."""
        if self._done.is_set():
            self.view.release()  # a cancelled turn that ended since: its last lines first
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

    def _ask(self, question: str, *, interrupt: bool = False) -> str:
        """A one-line answer on the main thread (no history); Ctrl-C/Ctrl-D answer ''.

        ``interrupt``: Ctrl-C raises ``KeyboardInterrupt`` instead (it cancels the turn).
        """
        if not self.interactive:
            return ""
        from prompt_toolkit import prompt

        try:
            return str(prompt(question)).strip()
        except EOFError:
            return ""
        except KeyboardInterrupt:
            if interrupt:
                raise
            return ""

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
        try:
            worker.start()
        except KeyboardInterrupt:  # Ctrl-C before the turn could be followed
            token.cancel()
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
        deadline = self._cancelling(token) if token.cancelled else None
        while True:
            # Everything inside the ``try``: Ctrl-C lands wherever the loop is, and one that
            # escaped it would leave the turn running, uncancelled, behind the next prompt.
            try:
                if done.is_set() or (deadline is not None and time.monotonic() > deadline):
                    break
                self._serve_requests()
                done.wait(0.05)
            except KeyboardInterrupt:
                if deadline is not None or done.is_set():
                    break  # a second Ctrl-C, or one that came as the turn ended: no cancel
                deadline = self._cancelling(token)
        if not done.is_set():
            # What the turn still prints waits until it ends: drawn now, it would land
            # over the prompt that comes next.
            self.view.hold()
            self.io.dim(
                "the cancelled turn stops once its running tool call finishes; "
                "what it still shows follows before your next turn"
            )
        self._refuse_pending()

    def _cancelling(self, token: CancelToken) -> float:
        """Cancel the turn and say so; when to stop waiting for it."""
        token.cancel()
        self.view.end_block()
        self.io.dim("cancelling the turn...")
        return time.monotonic() + CANCEL_WAIT_SECONDS

    def _wait_worker(self) -> None:
        done = self._done
        if self._worker is not None and not done.is_set():
            self.io.dim("waiting for the cancelled turn to finish...")
            while not done.is_set():
                self._refuse_pending()
                done.wait(0.1)
        self._worker = None
        self.view.release()

    def confirm(self, command: str, reason: str) -> bool:
        """The engine's confirm callback (worker thread): ask on the main thread, wait."""
        if not self.interactive:
            return False
        answer: queue.Queue[bool] = queue.Queue(maxsize=1)
        self._requests.put((command, reason, answer))
        self._requested.set()
        return answer.get()

    def _serve_requests(self) -> None:
        if not self._requested.is_set():
            return
        self._requested.clear()
        while True:
            try:
                command, reason, answer = self._requests.get_nowait()
            except queue.Empty:
                return
            self.view.end_block()
            self.io.say(f"The guard flags this command ({reason}):", style="yellow")
            self.io.say(f"  {terminal_safe(command)}")
            try:
                said = self._ask("Run it? [y/N] ", interrupt=True)
            except KeyboardInterrupt:
                answer.put(False)  # refused; the caller then cancels the whole turn
                raise
            answer.put(said.lower() in ("y", "yes"))

    def _refuse_pending(self) -> None:
        while True:
            try:
                _, _, answer = self._requests.get_nowait()
            except queue.Empty:
                return
            answer.put(False)
