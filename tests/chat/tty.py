"""Driving ``tilth chat`` through a real pseudo-terminal (pexpect) against the fake server.

The chat is a fork of the warm CLI process (``tests/warm_cli.py``) that takes the
pseudo-terminal as its controlling terminal, as a command started by a shell does: keys,
Ctrl-C, resizes and the hang-up reach it as they would reach ``python -m tilth chat``,
without a new interpreter importing Tilth, httpx and prompt_toolkit for every test.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path
from typing import Any

import pexpect
import pexpect.fdpexpect

from tests.chat.screen import Screen
from tests.chat.support import top_level_sandbox
from tests.warm_cli import WarmProcess
from tests.warm_cli import shared as shared_warm_cli
from tilth.model import FakeServer, Script
from tilth.model.script import Reply, stall

PROMPT = "›"
_ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[@-Z\\-_])")
_SHOWN_CHARS = 2_000


def chat_env(home: Path, server: FakeServer, **extra: str) -> dict[str, str]:
    """The child's environment: an isolated home, every role aimed at the fake server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILTH_")}
    env.update(server.tilth_env())
    env.update(
        {
            "TILTH_HOME": str(home),
            "TILTH_MODEL_MAX_RETRIES": "0",
            "PROMPT_TOOLKIT_NO_CPR": "1",
            "TERM": "xterm-256color",
            "NO_COLOR": "",
        }
    )
    env.update(top_level_sandbox())
    env.update(extra)
    return env


class TerminalChild(pexpect.fdpexpect.fdspawn):
    """pexpect on the terminal's master side of a process: what ``pexpect.spawn`` offers the
    tests (send, expect, kill, close, exit status), for a process the warm CLI started."""

    def __init__(self, master: int, process: WarmProcess) -> None:
        super().__init__(master, encoding="utf-8", timeout=30)
        self.process = process
        self.pid = process.pid
        self.exitstatus: int | None = None
        self.signalstatus: int | None = None

    def send(self, s: Any) -> int:
        if self.delaybeforesend:  # as pexpect.spawn: a typist, not a burst
            time.sleep(self.delaybeforesend)
        data = self._encoder.encode(self._coerce_send_string(s), final=False)
        self._log(s, "send")
        view = memoryview(data)
        while view:
            view = view[os.write(self.child_fd, view) :]
        return len(data)

    def isalive(self) -> bool:
        return self.process.poll() is None

    def kill(self, sig: int) -> None:
        if self.isalive():
            os.kill(self.pid, sig)

    def terminate(self, force: bool = False) -> bool:
        if self.isalive():
            os.killpg(self.pid, signal.SIGKILL if force else signal.SIGTERM)
        return True

    def close(self, force: bool = True) -> None:
        """Close the master side (the terminal hangs up) and collect the exit status."""
        super().close()
        try:
            code = self.process.wait(10)
        except subprocess.TimeoutExpired:
            if not force:
                raise
            os.killpg(self.pid, signal.SIGKILL)
            code = self.process.wait(10)
        self.exitstatus, self.signalstatus = (code, None) if code >= 0 else (None, -code)


def spawn_chat(
    args: list[str], env: dict[str, str], cwd: Path, dimensions: tuple[int, int]
) -> TerminalChild:
    """``tilth chat <args>`` on a new pseudo-terminal of ``dimensions`` (rows, columns)."""
    master, slave = pty.openpty()
    rows, cols = dimensions
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    try:
        process = shared_warm_cli().popen(
            ["chat", *args],
            env=env,
            cwd=cwd,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            terminal=True,
        )
    finally:
        os.close(slave)
    return TerminalChild(master, process)


class TtyChat:
    """One ``tilth chat`` process on a pseudo-terminal."""

    def __init__(
        self,
        args: list[str],
        env: dict[str, str],
        cwd: Path,
        log: Path | None = None,
        dimensions: tuple[int, int] = (50, 140),
    ) -> None:
        self.child = spawn_chat(args, env, cwd, dimensions)
        self._log = open(log, "w", encoding="utf-8") if log else None
        if self._log is not None:
            self.child.logfile_read = self._log

    def prompt(self) -> None:
        """Wait until the input prompt is ready."""
        self.expect_exact(PROMPT)

    def send(self, text: str) -> None:
        self.child.send(text + "\r")

    def expect(self, pattern: str, timeout: float = 30) -> Any:
        try:
            self.child.expect(pattern, timeout=timeout)
        except pexpect.TIMEOUT:
            raise self._timed_out(f"/{pattern}/", timeout) from None
        return self.child.match

    def expect_exact(self, text: str, timeout: float = 30) -> None:
        try:
            self.child.expect_exact(text, timeout=timeout)
        except pexpect.TIMEOUT:
            raise self._timed_out(repr(text), timeout) from None

    def _timed_out(self, wanted: str, timeout: float) -> pexpect.TIMEOUT:
        """The timeout, with what the chat printed instead (escape sequences left out)."""
        shown = _ESCAPES.sub("", str(self.child.before or ""))[-_SHOWN_CHARS:]
        return pexpect.TIMEOUT(
            f"{wanted} did not come within {timeout:g}s; the terminal showed since the "
            f"last match:\n{shown}"
        )

    def esc_esc(self) -> None:
        self.child.send("\x1b\x1b")

    def pick_turn(self, typed: str) -> None:
        """In the rewind picker: type ``typed`` (a number jumps to its turn), then Enter."""
        self.expect_exact("Go back to which turn?")
        self.expect_exact("Enter choose")
        self.child.send(typed + "\r")

    def pick_action(self, typed: str) -> None:
        """In the action menu after the picker: type ``typed``, then Enter."""
        self.expect_exact("what to go back to")
        self.expect_exact("Enter choose")
        self.child.send(typed + "\r")

    def answer(self, question: str, reply: str) -> None:
        self.expect_exact(question.rstrip())
        self.send(reply)

    def leave(self) -> int:
        """Ctrl-D at the prompt; returns the exit status."""
        self.child.send("\x04")
        self.child.expect(pexpect.EOF, timeout=30)
        self.child.close()
        if self._log is not None:
            self._log.close()
        return int(self.child.exitstatus if self.child.exitstatus is not None else -1)

    def close(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)
        if self._log is not None and not self._log.closed:
            self._log.close()


def server_for(replies: list[dict[str, Any]]) -> FakeServer:
    return FakeServer(Script({"worker": replies})).start()


def streamed(answer: Reply, pieces: int, pause: float) -> Reply:
    """``answer`` streamed with a silence of ``pause`` s every third chunk (a model writing)."""
    for after in range(2, pieces, 3):
        answer = stall(pause, answer, after=after)
    return answer


def screen_after_one_turn(
    tmp_path: Path, answer: Reply, dimensions: tuple[int, int], **env: str
) -> Screen:
    """What the terminal holds (scrollback included) after one prompt answered by ``answer``
    and Ctrl-D: ``tilth chat`` on a real pseudo-terminal of ``dimensions`` (rows, columns)."""
    work = tmp_path / "work"
    work.mkdir()
    server = server_for([answer])
    log = tmp_path / "tty.log"
    chat = TtyChat(["work"], chat_env(tmp_path / "home", server, **env), tmp_path, log, dimensions)
    try:
        chat.prompt()
        chat.send("please answer at length")
        chat.expect(r"── turn 1 ·")
        chat.prompt()
        assert chat.leave() == 0
    finally:
        chat.close()
        server.stop()
    screen = Screen(*dimensions)
    with log.open(encoding="utf-8", newline="") as output:
        screen.feed(output.read())
    return screen
