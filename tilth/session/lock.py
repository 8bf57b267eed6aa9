"""An exclusive per-session lock so two processes never drive one session."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from filelock import FileLock, Timeout

from tilth.errors import SessionLocked, StorageError


def pid_alive(pid: int) -> bool:
    """True when a process ``pid`` exists (zombies count as gone)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[-1].split()[:1] != ["Z"]
    except OSError:
        return True


class SessionLock:
    """Holds ``<session>/.lock``; the holder's pid is written beside it for messages.

    ``name`` picks another lock of the session (``.chat-open``: the one front end that
    has a chat open), with the same pid file beside it.
    """

    def __init__(
        self,
        session_dir: Path,
        session_id: str,
        on_dead_owner: Callable[[int], None] | None = None,
        *,
        name: str = ".lock",
    ) -> None:
        self.session_id = session_id
        self._lock = FileLock(str(session_dir / name), timeout=0)
        self._pid_path = session_dir / f"{name}.pid"
        self.on_dead_owner = on_dead_owner
        """Told the pid of a previous holder that died holding the lock (``kill -9``)."""

    def holder_pid(self) -> int | None:
        """The pid recorded by the current holder, if any."""
        try:
            return int(self._pid_path.read_text().strip())
        except (OSError, ValueError):
            return None

    def owner(self) -> tuple[int | None, bool]:
        """``(pid, alive)`` of the recorded holder, without touching the lock.

        A holder that exits normally removes its pid; one killed (``kill -9``, a crash)
        leaves it behind, so a recorded pid whose process is gone is a dead owner.
        """
        pid = self.holder_pid()
        if pid is None:
            return None, False
        return pid, pid_alive(pid)

    def acquire(self) -> SessionLock:
        """Take the lock or raise ``SessionLocked`` naming the holder.

        A session directory Tilth may not write to is a ``StorageError`` naming the
        lock file, not a lock held by "another process".
        """
        try:
            os.close(os.open(self._lock.lock_file, os.O_RDWR | os.O_CREAT, 0o644))
        except OSError as exc:
            raise StorageError.wrap("lock", self._lock.lock_file, exc) from None
        try:
            self._lock.acquire()
        except Timeout:
            pid = self.holder_pid()
            who = f"pid {pid}" if pid else "another process"
            raise SessionLocked(
                f"session {self.session_id} is in use by {who}",
                hint="wait for it to finish, or stop it (Ctrl-C) and try again",
            ) from None
        dead = self.holder_pid()  # we hold the lock: a pid still recorded is a dead owner's
        try:
            self._pid_path.write_text(str(os.getpid()))
        except OSError as exc:
            self._lock.release(force=True)
            raise StorageError.wrap("write", self._pid_path, exc) from None
        if dead is not None and dead != os.getpid() and self.on_dead_owner is not None:
            self.on_dead_owner(dead)
        return self

    def release(self) -> None:
        """Give the lock back (idempotent)."""
        if self._lock.is_locked:
            self._pid_path.unlink(missing_ok=True)
            self._lock.release(force=True)

    @property
    def held(self) -> bool:
        """True while this process holds the lock."""
        return self._lock.is_locked

    def __enter__(self) -> SessionLock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
