"""A pseudo-terminal for the chat benchmarks: prompt_toolkit draws on it, nobody reads it.

A file whose name starts with ``_`` is not run by ``run_all.py``.
"""

from __future__ import annotations

import fcntl
import os
import struct
import termios
import threading
from typing import Any


class Terminal:
    """A pseudo-terminal whose other end is read and thrown away; input from a pipe.

    ``size`` (rows, columns) is set on the terminal when given; otherwise prompt_toolkit
    finds none and uses its default.
    """

    def __init__(self, size: tuple[int, int] | None = None) -> None:
        from prompt_toolkit.input import create_pipe_input
        from prompt_toolkit.output.vt100 import Vt100_Output

        master, slave = os.openpty()
        if size is not None:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", *size, 0, 0))
        self.master = master
        self.stream = os.fdopen(slave, "w", encoding="utf-8")
        self.output = Vt100_Output.from_pty(self.stream, term="xterm-256color")
        self._input_cm = create_pipe_input()
        self.input: Any = self._input_cm.__enter__()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                if not os.read(self.master, 1 << 16):
                    return
            except OSError:
                return

    def close(self) -> None:
        self._input_cm.__exit__(None, None, None)
        self.stream.close()
