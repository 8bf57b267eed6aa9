"""Driving ``tilth chat`` through a real pseudo-terminal (pexpect) against the fake server."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import termios
from pathlib import Path
from typing import Any

import pexpect
from pexpect.fdpexpect import fdspawn

from tests.warm_cli import shared
from tilth.model import FakeServer, Script

PROMPT = "›"


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
    env.update(extra)
    return env


class TtyChat:
    """One ``tilth chat`` process on a pseudo-terminal (its controlling terminal, as a shell
    would give it), forked from the warm CLI server (``tests/warm_cli.py``)."""

    def __init__(
        self,
        args: list[str],
        env: dict[str, str],
        cwd: Path,
        log: Path | None = None,
        dimensions: tuple[int, int] = (50, 140),
    ) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", *dimensions, 0, 0))
        try:
            self.process = shared().popen(
                ["chat", *args],
                env=env,
                cwd=cwd,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                controlling_tty=True,
            )
        finally:
            os.close(slave)
        self.child = fdspawn(master, timeout=30, encoding="utf-8")
        self._log = open(log, "w", encoding="utf-8") if log else None
        if self._log is not None:
            self.child.logfile_read = self._log

    def prompt(self) -> None:
        """Wait until the input prompt is ready."""
        self.child.expect_exact(PROMPT)

    def send(self, text: str) -> None:
        self.child.send(text + "\r")

    def expect(self, pattern: str, timeout: float = 30) -> Any:
        self.child.expect(pattern, timeout=timeout)
        return self.child.match

    def expect_exact(self, text: str, timeout: float = 30) -> None:
        self.child.expect_exact(text, timeout=timeout)

    def esc_esc(self) -> None:
        self.child.send("\x1b\x1b")

    def answer(self, question: str, reply: str) -> None:
        self.expect_exact(question.rstrip())
        self.send(reply)

    def leave(self) -> int:
        """Ctrl-D at the prompt; returns the exit status."""
        self.child.send("\x04")
        return self.exit_status()

    def exit_status(self) -> int:
        """Wait for the terminal to close and the process to end; its exit status."""
        self.child.expect(pexpect.EOF, timeout=30)
        self.child.close()
        if self._log is not None:
            self._log.close()
        return self.process.wait(30)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
        if self.child.child_fd != -1:
            self.child.close()
        if self._log is not None and not self._log.closed:
            self._log.close()


def server_for(replies: list[dict[str, Any]]) -> FakeServer:
    return FakeServer(Script({"worker": replies})).start()
