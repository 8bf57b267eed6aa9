"""Helpers for prep-feature tests: seed bundles, the CLI environment, a pseudo-terminal driver."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import time
from pathlib import Path
from typing import Any

from tests.stdin_wait import wait_reading_stdin
from tests.warm_cli import shared
from tilth.model import FakeServer, Script, reply, tool_call

API_KEY = "sk-test-prep-5ecr3t-0123456789"
MODEL = "scripted-prep"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def task(number: int, **overrides: Any) -> dict[str, Any]:
    """One valid prd entry ``T-00<number>``."""
    entry = {
        "id": f"T-{number:03d}",
        "title": f"Add feature {number}",
        "description": f"Implement feature {number} in src/app.py.",
        "acceptance_criteria": [f"feature {number} returns 'ok'"],
    }
    entry.update(overrides)
    return entry


def body_for(number: int) -> str:
    return f"def test_feature_{number}():\n    assert {number} == {number}\n"


def seed_args(tasks: int = 1, **overrides: Any) -> dict[str, Any]:
    """Valid ``write_seed`` arguments for ``tasks`` tasks (one test file each)."""
    args: dict[str, Any] = {
        "prd_entries": [task(n) for n in range(1, tasks + 1)],
        "test_files": {f"test_t{n:03d}_feature_{n}.py": body_for(n) for n in range(1, tasks + 1)},
        "tldr": "\n".join(f"- **T-{n:03d}:** add feature {n}" for n in range(1, tasks + 1)),
        "open_questions": ["should feature 1 log?"],
        "blockers": [],
        "scope_notes": "No UI changes.",
    }
    args.update(overrides)
    return args


def write_seed(tasks: int = 1, **overrides: Any) -> dict[str, Any]:
    """A model reply calling ``write_seed``."""
    return reply(None, tool_call("write_seed", **seed_args(tasks, **overrides)))


def quick_script(tasks: int = 1) -> Script:
    """An interview that writes a seed at once."""
    return Script([write_seed(tasks)])


def cli_env(server: FakeServer, **extra: str) -> dict[str, str]:
    """Environment aiming the prep role at ``server`` (no backoff waits)."""
    return {
        "TILTH_BASE_URL": server.base_url,
        "TILTH_API_KEY": API_KEY,
        "TILTH_WORKER_MODEL": MODEL,
        "TILTH_MODEL_BACKOFF_SECONDS": "0",
        **extra,
    }


def session_dirs(sessions_dir: Path) -> list[Path]:
    if not sessions_dir.is_dir():
        return []
    return sorted(p for p in sessions_dir.iterdir() if p.is_dir())


def tool_messages(request: dict[str, Any]) -> list[str]:
    """The tool results the model saw in one recorded request."""
    messages = request["body"]["messages"]
    return [m["content"] for m in messages if m["role"] == "tool"]


# A seed write killed at a named point (argv: session_dir worktree point bundle-json).
CRASHER = """
import json, os, sys
from pathlib import Path
from tilth.seed.sink import FileSeedSink

session_dir, worktree, point, bundle = sys.argv[1:5]
args = json.loads(bundle)

def fault(reached):
    if reached == point:
        os._exit(17)  # a crash: no cleanup, no finally blocks

FileSeedSink(Path(session_dir), Path(worktree), fault=fault).write_seed(
    args["prd_entries"], args["test_files"], {"schema": 1, "tldr": "second"}
)
"""


class Terminal:
    """The real CLI on a pseudo-terminal: wait for text, type lines, collect the output."""

    def __init__(self, args: list[str], env: dict[str, str], timeout: float = 60) -> None:
        master, slave = pty.openpty()
        full = {k: v for k, v in {**os.environ, **env}.items() if k != "TILTH_DEBUG"}
        self.child = shared().popen(
            args, stdin=slave, stdout=slave, stderr=slave, env=full, start_new_session=True
        )
        os.close(slave)
        self.master = master
        self.raw = b""
        self.seen = 0
        self.deadline = time.monotonic() + timeout

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw.decode("utf-8", "replace")).replace("\r\n", "\n")

    def _pump(self) -> bool:
        """Read what is there; False once the child closed the terminal."""
        ready, _, _ = select.select([self.master], [], [], 0.1)
        if not ready:
            return self.child.poll() is None
        try:
            chunk = os.read(self.master, 4096)
        except OSError:
            return False
        self.raw += chunk
        return bool(chunk)

    def expect(self, needle: str) -> None:
        """Wait until ``needle`` appears after the previous expectation."""
        while needle not in self.text[self.seen :]:
            assert time.monotonic() < self.deadline, f"waited for {needle!r}; got {self.text!r}"
            if not self._pump():
                assert needle in self.text[self.seen :], f"exited before {needle!r}: {self.text}"
        self.seen = self.text.index(needle, self.seen) + len(needle)

    def send(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def interrupt(self) -> None:
        """Ctrl-C at the question being asked (once the child reads its answer)."""
        wait_reading_stdin(self.child.pid)
        self.child.send_signal(signal.SIGINT)

    def finish(self) -> tuple[int, str]:
        """Wait for exit; the code and the whole output."""
        try:
            while self._pump():
                assert time.monotonic() < self.deadline, f"no exit; output: {self.text!r}"
            code = self.child.wait(timeout=30)
        finally:
            os.close(self.master)
            if self.child.poll() is None:
                self.child.kill()
                self.child.wait()
        return code, self.text
