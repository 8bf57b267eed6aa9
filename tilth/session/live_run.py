"""Stopping a live run before a restart: SIGINT to the lock holder (SIGTERM when it ignores
SIGINT), then wait for the lock.

Only a process that is plainly a Tilth process is signalled (``tilth ...`` or
``python -m tilth ...``); anything else is refused, never killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tilth.errors import SessionLocked
from tilth.session.store import Session

STOP_WAIT_SECONDS = 60.0


def _command_line(pid: int) -> list[str] | None:
    """The arguments of ``pid`` (Linux /proc, else ``ps``), or None when unknown."""
    proc = Path(f"/proc/{pid}/cmdline")
    try:
        raw = proc.read_bytes()
    except OSError:
        raw = None
    if raw is not None:
        return [arg.decode("utf-8", "replace") for arg in raw.split(b"\0") if arg]
    try:
        out = subprocess.run(
            ["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.split() or None


def is_tilth_process(args: list[str]) -> bool:
    """True for ``tilth ...`` or ``python -m tilth ...`` (a path merely naming tilth is not)."""
    for index, arg in enumerate(args[:3]):
        if Path(arg).name == "tilth":
            return True
        if arg == "-m" and index + 1 < len(args) and args[index + 1] == "tilth":
            return True
    return False


def _ignores_sigint(pid: int) -> bool:
    """True when ``pid`` ignores SIGINT, as a job a script starts with ``&`` does (Linux only).

    Ctrl-C cannot stop such a run; SIGTERM, which a run takes as Ctrl-C, can.
    """
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("SigIgn:"):
            try:
                return bool(int(line.split()[1], 16) >> (signal.SIGINT - 1) & 1)
            except (IndexError, ValueError):
                return False
    return False


def _lock_is_free(session: Session) -> bool:
    lock = session.lock()
    try:
        lock.acquire()
    except SessionLocked:
        return False
    lock.release()
    return True


def stop_live_run(session: Session, wait: float = STOP_WAIT_SECONDS) -> int | None:
    """SIGINT (SIGTERM if it ignores SIGINT) the lock's holder and wait until it lets go.

    Returns the pid that was stopped, or None when nothing held the lock. Raises
    ``SessionLocked`` when the holder is unknown, not Tilth, or does not stop in time.
    """
    if _lock_is_free(session):
        return None
    pid = session.lock().holder_pid()
    if pid == os.getpid():
        # This very process holds it (a server's own chat turn or go-back): a SIGINT
        # would stop the process, not the work.
        raise SessionLocked(
            f"session {session.id} is busy with an operation of this process",
            hint="wait for it to finish, then try again",
        )
    command = _command_line(pid) if pid else None
    if pid is None or command is None or not is_tilth_process(command):
        who = f"pid {pid}" if pid else "an unknown process"
        raise SessionLocked(
            f"session {session.id} is in use by {who}, which does not look like a tilth "
            "run; not stopping it",
            hint="stop it yourself, then try again",
        )
    stop = signal.SIGTERM if _ignores_sigint(pid) else signal.SIGINT
    try:
        os.kill(pid, stop)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if _lock_is_free(session):
            return pid
        time.sleep(0.2)
    raise SessionLocked(
        f"the run of session {session.id} (pid {pid}) did not stop within {wait:.0f}s",
        hint=f"wait for it, or stop it yourself (kill -{stop.name[3:]} {pid}), then try again",
    )
