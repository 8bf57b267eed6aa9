"""Background runs: ``POST .../resume`` starts ``tilth resume <id>`` as a child process.

The child gets its own process group and writes its output to
``$TILTH_HOME/serve/runs/<id>.log``, so a run that crashes takes nothing of the
server with it. The session lock still decides who drives a session: a child
that finds the session in use exits with the CLI's message. ``stop`` stops a run
the way ``tilth restart`` does (SIGINT to the lock holder, then wait for the lock).
When the server shuts down it interrupts the runs it started (they stay resumable).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilth import Session
from tilth.errors import SessionLocked
from tilth.session import utc_now

SHUTDOWN_WAIT_SECONDS = 10.0


@dataclass
class Run:
    """One child ``tilth resume`` this server started."""

    session_id: str
    process: subprocess.Popen[bytes]
    log_path: Path
    started_at: str
    session_dir: Path | None = None
    """Where the session lives: once it is gone (``tilth reset``), so is its finished run."""

    def state(self) -> dict[str, Any]:
        code = self.process.poll()
        return {
            "pid": self.process.pid,
            "running": code is None,
            "exit_code": code,
            "started_at": self.started_at,
            "log": str(self.log_path),
        }

    def log_tail(self, limit: int = 4000) -> str:
        """The end of the run's output (what a user needs when it failed)."""
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(max(0, self.log_path.stat().st_size - limit))
                return handle.read().decode("utf-8", "replace")
        except OSError:
            return ""


class Runs:
    """The children this server started, by session id."""

    def __init__(self, home: Path) -> None:
        self.directory = home / "serve" / "runs"
        self._runs: dict[str, Run] = {}
        self._lock = threading.Lock()

    def get(self, session_id: str) -> Run | None:
        with self._lock:
            return self._runs.get(session_id)

    def state(self, session_id: str) -> dict[str, Any] | None:
        run = self.get(session_id)
        return run.state() if run else None

    def start(self, session: Session, holder: int | None) -> Run:
        """Start ``tilth resume <id>`` in the background; refuses while the session is driven."""
        with self._lock:
            current = self._runs.get(session.id)
            if current is not None and current.process.poll() is None:
                raise SessionLocked(
                    f"session {session.id} is already running (pid {current.process.pid})",
                    hint="stop it first: POST /api/sessions/<id>/stop",
                )
            if holder is not None:
                raise SessionLocked(
                    f"session {session.id} is in use by pid {holder}",
                    hint="wait for it to finish, or stop it: POST /api/sessions/<id>/stop",
                )
            self.directory.mkdir(parents=True, exist_ok=True)
            log_path = self.directory / f"{session.id}.log"
            with open(log_path, "ab") as log:
                log.write(f"--- tilth resume {session.id} at {utc_now()}\n".encode())
                log.flush()
                process = subprocess.Popen(
                    [sys.executable, "-m", "tilth", "resume", session.id],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                )
            run = Run(session.id, process, log_path, utc_now(), session.dir)
            self._runs[session.id] = run
            return run

    def reap(self) -> None:
        """Collect children that ended (no zombies left holding a pid), and forget the
        ended runs of sessions that are gone (a finished run's exit and output are kept
        while its session is there to show them)."""
        with self._lock:
            for session_id, run in list(self._runs.items()):
                ended = run.process.poll() is not None
                if ended and run.session_dir is not None and not run.session_dir.exists():
                    del self._runs[session_id]

    def shutdown(self, wait: float = SHUTDOWN_WAIT_SECONDS) -> None:
        """Interrupt every live child (as Ctrl-C would), then kill what is left."""
        with self._lock:
            live = [r for r in self._runs.values() if r.process.poll() is None]
        for run in live:
            _signal_group(run.process, signal.SIGINT)
        deadline = time.monotonic() + wait
        for run in live:
            try:
                run.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(run.process, signal.SIGKILL)
                run.process.wait(5)


def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
