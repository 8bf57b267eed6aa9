"""Wait until a child process is blocked reading its standard input.

A test that presses Ctrl-C "at a prompt" must wait for the read, not for the prompt text:
the prompt is written a moment before the read starts, and a SIGINT that lands in between
(after Python's last check for signals, before the ``read`` system call) is only noticed at
the next signal, as in any CPython program. A person is never that fast; a loaded test
machine is.
"""

from __future__ import annotations

import time
from pathlib import Path

_READ = {"0", "63"}
"""The ``read`` system call's number on x86-64 and on arm64 (``/proc/<pid>/syscall``)."""


def wait_reading_stdin(pid: int, timeout: float = 10.0) -> None:
    """Return once ``pid`` sits in ``read(0, ...)``; after ``timeout``, or where ``/proc``
    cannot tell, after a short pause."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            fields = Path(f"/proc/{pid}/syscall").read_text().split()
        except OSError:
            time.sleep(0.5)
            return
        if len(fields) > 1 and fields[0] in _READ and int(fields[1], 16) == 0:
            return
        time.sleep(0.01)
