"""Another process that holds a session's lock: what a live run looks like to a verb."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tilth.session.store import Session

_HOLDER = """
import sys, time
from pathlib import Path
from tilth.session.store import Session
with Session(sys.argv[1], Path(sys.argv[2])).lock():
    print("held", flush=True)
    time.sleep(60)
"""


@contextmanager
def held_elsewhere(session: Session) -> Iterator[int]:
    """A python process (not a tilth run) holds ``session``'s lock; yields its pid."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, session.id, str(Path(session.dir))],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait(10)
