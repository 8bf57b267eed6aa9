"""The exclusive session lock, contended by real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tilth.errors import SessionLocked
from tilth.session.store import Session

# Holds the lock until its stdin closes; "locked" tells the parent it has it.
HOLDER = """
import sys
from pathlib import Path
from tilth.session.store import Session
session = Session.open(Path(sys.argv[1]), sys.argv[2])
with session.lock():
    print("locked", flush=True)
    sys.stdin.read()
print("released", flush=True)
"""


@contextmanager
def held_by_child(session: Session) -> Iterator[subprocess.Popen[str]]:
    """A child process that holds ``session``'s lock for the duration."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(session.dir.parent), session.id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "locked"
        yield child
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=30)


def test_second_process_is_refused_with_the_holders_pid(tmp_path: Path) -> None:
    session = Session.create(tmp_path, tmp_path)
    with held_by_child(session) as child:
        with pytest.raises(SessionLocked) as info:
            session.lock().acquire()
        assert str(info.value) == f"session {session.id} is in use by pid {child.pid}"
        assert info.value.exit_code == 2
        assert session.lock().holder_pid() == child.pid
        assert child.stdin is not None
        child.stdin.close()
        assert child.stdout is not None and child.stdout.readline().strip() == "released"
    with session.lock() as lock:
        assert lock.held
        assert lock.holder_pid() == os.getpid()
    assert not lock.held
    assert lock.holder_pid() is None


def test_a_killed_holder_does_not_leave_the_session_stuck(tmp_path: Path) -> None:
    session = Session.create(tmp_path, tmp_path)
    with held_by_child(session) as child:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    # The kernel dropped the lock with the process; the stale pid file is overwritten.
    with session.lock() as lock:
        assert lock.holder_pid() == os.getpid()


def test_release_is_idempotent(tmp_path: Path) -> None:
    session = Session.create(tmp_path, tmp_path)
    lock = session.lock().acquire()
    lock.release()
    lock.release()
    assert not lock.held
