"""Driving ``tilth chat`` through a real pseudo-terminal (pexpect) against the fake server."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pexpect

from tests.chat.screen import Screen
from tilth.model import FakeServer, Script
from tilth.model.script import Reply, stall

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
    """One ``tilth chat`` process on a pseudo-terminal."""

    def __init__(
        self,
        args: list[str],
        env: dict[str, str],
        cwd: Path,
        log: Path | None = None,
        dimensions: tuple[int, int] = (50, 140),
    ) -> None:
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "tilth", "chat", *args],
            env=env,
            cwd=str(cwd),
            dimensions=dimensions,
            encoding="utf-8",
            timeout=30,
        )
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
