"""The one IO object: every print, prompt and confirmation goes through here.

Commands receive an ``IO``; tests and non-interactive runs get the same class
with stdin not a TTY, in which case prompts refuse instead of hanging.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from tilth.errors import Aborted, UsageError

if TYPE_CHECKING:
    from rich.console import Console


def _visible(code: int) -> str:
    return {0x0D: "\\r", 0x1B: "\\x1b"}.get(
        code, f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    )


# C0 controls but tab and newline, DEL, C1 controls (0x9b is a one-byte CSI), and the
# bidirectional overrides that make text read differently from what it is.
_CONTROLS = [c for c in range(0x20) if c not in (0x09, 0x0A)] + list(range(0x7F, 0xA0))
_CONTROLS += [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_NEUTRAL = str.maketrans(
    {chr(c): _visible(c) for c in _CONTROLS}
    # A byte of a file name that is not UTF-8 (os.fsdecode's lone surrogate): shown as the byte.
    | {chr(0xDC80 + b): f"\\x{0x80 + b:02x}" for b in range(0x80)}
)


def neutralise(text: str) -> str:
    """``text`` with control and escape sequences shown (``\\x1b]0;...``), never interpreted."""
    return text.translate(_NEUTRAL)


class OutputClosed(KeyboardInterrupt):
    """The terminal or pipe we print to went away (SIGPIPE/EPIPE, a hung-up terminal).

    A ``KeyboardInterrupt``, so a run stops exactly as on Ctrl-C: state saved, a
    ``stop {interrupted}`` event, resumable.
    """


_GONE = (errno.EPIPE, errno.EIO, errno.ENXIO, errno.EBADF)


class _Guarded:
    """A text stream that survives its reader going away: later writes go to ``fallback``."""

    def __init__(self, stream: Any, fallback: Callable[[], Any], name: str) -> None:
        self._stream: Any = stream
        self._fallback = fallback
        self.name = name
        self.closed_reason: str | None = None

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._stream or _devnull(), attr)

    def _broken(self, exc: OSError) -> None:
        if exc.errno not in _GONE:
            raise exc
        stream, self._stream = self._stream, self._fallback()
        self.closed_reason = (
            f"the {self.name} pipe was closed (SIGPIPE)"
            if exc.errno == errno.EPIPE
            else f"the terminal behind {self.name} went away"
        )
        # Python flushes sys.stdout at exit; a dead pipe would print a stray traceback.
        try:
            fd = stream.fileno() if stream is not None else -1
            if fd in (1, 2):
                os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
        except (OSError, ValueError, AttributeError):
            pass

    def write(self, text: str) -> int:
        if self._stream is None:
            return len(text)
        try:
            return self._stream.write(text)
        except OSError as exc:
            self._broken(exc)
            return self.write(text)

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except OSError as exc:
            self._broken(exc)

    def isatty(self) -> bool:
        try:
            return self._stream is not None and self._stream.isatty()
        except (OSError, ValueError):
            return False


_NULL: list[TextIO] = []


def _devnull() -> TextIO:
    if not _NULL:
        _NULL.append(open(os.devnull, "w"))  # lives as long as the process
    return _NULL[0]


class _LineSink(io.TextIOBase):
    """A text stream that hands each complete, non-blank line to ``sink`` (or drops it)."""

    def __init__(self, sink: Callable[[str], Any] | None) -> None:
        self.sink = sink
        self.pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.pending += text
        while "\n" in self.pending:
            line, self.pending = self.pending.split("\n", 1)
            if self.sink is not None and line.strip():
                self.sink(line)
        return len(text)


class IO:
    """Terminal input and output for one command.

    Every line it prints goes through ``neutralise``: text from a model or a file
    cannot retitle the terminal, move the cursor or hide what follows.
    """

    def __init__(
        self,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.stdin = stdin or sys.stdin
        self._err = _Guarded(stderr or sys.stderr, lambda: None, "stderr")
        self._out = _Guarded(stdout or sys.stdout, lambda: None, "stdout")
        # What the reader no longer reads goes nowhere (`tilth checkpoints | head` stays quiet);
        # a run moves its summary to stderr (``stdout_to_stderr``).
        self.stdout: TextIO = self._out  # type: ignore[assignment]
        self.stderr: TextIO = self._err  # type: ignore[assignment]
        self._closed_raised = False
        self._console: Console | None = None
        self._err_console: Console | None = None

    @classmethod
    def to_lines(cls, on_line: Callable[[str], Any] | None) -> IO:
        """An IO with no terminal: each non-blank line printed goes to ``on_line`` (or nowhere)."""
        out, err = _LineSink(on_line), _LineSink(on_line)
        return cls(stdin=io.StringIO(), stdout=out, stderr=err)  # type: ignore[arg-type]

    @property
    def closed_reason(self) -> str | None:
        """Why output can no longer reach its reader (None while it can)."""
        return self._out.closed_reason or self._err.closed_reason

    def raise_if_closed(self) -> None:
        """Raise ``OutputClosed`` once, the first time this is called after output went away."""
        reason = self.closed_reason
        if reason and not self._closed_raised:
            self._closed_raised = True
            raise OutputClosed(reason)

    def stdout_to_stderr(self) -> None:
        """From now on, lines meant for a stdout nobody reads go to stderr instead."""
        if self._out.closed_reason:
            self._out._stream = self._err

    @property
    def interactive(self) -> bool:
        """True when a person can answer prompts (stdin is a terminal)."""
        try:
            return self.stdin.isatty()
        except (AttributeError, ValueError):
            return False

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self.stdout, highlight=False, soft_wrap=True)
        return self._console

    @property
    def err_console(self) -> Console:
        if self._err_console is None:
            from rich.console import Console

            self._err_console = Console(file=self.stderr, highlight=False, soft_wrap=True)
        return self._err_console

    # ---- output ----------------------------------------------------------------------
    def say(self, text: str = "", style: str | None = None) -> None:
        """Print a line to stdout (``style`` is a rich style name)."""
        self.console.print(neutralise(text), style=style, markup=False)

    def markup(self, text: str) -> None:
        """Print a line with rich markup."""
        self.console.print(neutralise(text))

    def dim(self, text: str) -> None:
        self.say(text, style="dim")

    def ok(self, text: str) -> None:
        self.say(text, style="green")

    def note(self, text: str) -> None:
        """A dim informational line on stderr (keeps stdout clean for ``--json``)."""
        self.err_console.print(neutralise(text), style="dim", markup=False)

    def warn(self, text: str) -> None:
        """A warning on stderr."""
        self.err_console.print(f"warning: {neutralise(text)}", style="yellow", markup=False)

    def error(self, text: str, hint: str | None = None) -> None:
        """An error line (and optional hint) on stderr."""
        self.err_console.print(f"error: {neutralise(text)}", style="bold red", markup=False)
        if hint:
            self.err_console.print(f"hint: {neutralise(hint)}", style="yellow", markup=False)

    def table(self, table: Any) -> None:
        """Print a rich table; piped output is never wrapped or cropped to a guessed width."""
        _neutralise_cells(table)
        if self.console.is_terminal:
            self.console.print(table)
            return
        from io import StringIO

        from rich.console import Console

        buffer = StringIO()
        Console(file=buffer, width=100_000, highlight=False, color_system=None).print(table)
        # Cells are padded to the widest one; trailing blanks only get in the way of scripts.
        lines = buffer.getvalue().splitlines()
        self.stdout.write("".join(line.rstrip() + "\n" for line in lines))
        self.stdout.flush()

    def print_json(self, value: Any) -> None:
        """Plain JSON on stdout (no styling), for ``--json`` flags."""
        import json

        self.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
        self.stdout.flush()

    # ---- input -----------------------------------------------------------------------
    def readline(self, prompt: str = "> ") -> str | None:
        """One line from stdin (prompt shown on a TTY); None at end of input."""
        if self.interactive:
            self.stdout.write(neutralise(prompt))
            self.stdout.flush()
        line = self.stdin.readline()
        if not line:
            return None
        return line.rstrip("\r\n")

    def confirm(
        self,
        question: str,
        *,
        assume_yes: bool = False,
        flag: str = "-y",
        command: str | None = None,
    ) -> None:
        """Ask ``[y/N]``; raise ``Aborted`` unless the answer is yes.

        Without a terminal, refuse (exit 2) and name ``flag`` — or the full
        ``command`` to run, when given — instead of guessing.
        """
        if assume_yes:
            return
        if not self.interactive:
            hint = (
                f"to confirm non-interactively, run: {command}"
                if command
                else f"re-run with {flag} to confirm non-interactively"
            )
            raise UsageError(
                "refusing to continue without confirmation: stdin is not a terminal", hint=hint
            )
        answer = self.readline(f"{question} [y/N] ")
        if (answer or "").strip().lower() not in ("y", "yes"):
            raise Aborted("aborted; nothing was changed")

    def choose(self, header: str, options: list[tuple[str, str]], *, cancel: str = "cancel") -> str:
        """A numbered menu; returns the chosen key, or ``cancel`` on 0 / end of input."""
        self.say(header)
        for number, (_, label) in enumerate(options, 1):
            self.say(f"  {number}) {label}")
        self.say("  0) cancel")
        while True:
            answer = self.readline("> ")
            if answer is None:
                return cancel
            answer = answer.strip()
            if answer == "0":
                return cancel
            if answer.isdigit() and 1 <= int(answer) <= len(options):
                return options[int(answer) - 1][0]
            self.say(f"please choose 0-{len(options)}", style="yellow")


def _neutralise_cells(table: Any) -> None:
    """Neutralise the text cells of a rich ``Table`` in place (styled cells keep their style).

    A plain string cell becomes ``Text``: rich would read it as markup, and cells hold
    names a model or the worker chose (``[/b].txt`` would crash the table,
    ``[link=...]`` would put a hyperlink with a hidden target on the terminal).
    """
    from rich.text import Text

    for column in getattr(table, "columns", []):
        cells = getattr(column, "_cells", None)
        if not isinstance(cells, list):
            continue
        for index, cell in enumerate(cells):
            if isinstance(cell, str):
                cells[index] = Text(neutralise(cell))
            elif isinstance(cell, Text):
                cell.plain = neutralise(cell.plain)
