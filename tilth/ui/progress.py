"""Live run progress on the terminal: task, stage, turn and tokens.

On a terminal a rich status line is kept up to date below the notes, and while a
reply streams in it counts the reply's tokens live (a model thinking for minutes does
not look hung); otherwise (CI, pipes) each change is one plain line, so logs stay readable.
K attempts at once are a block of K lines redrawn in place (``LiveLanes``), each
collapsing to its result when its attempt ends; off a terminal, prefixed plain lines.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

from tilth.agent import Lane, Lanes
from tilth.model import Delta
from tilth.ui.io import IO, neutralise

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.live import Live
    from rich.status import Status


class TerminalProgress:
    """The run's ``Progress``: a live status line on a TTY, plain lines elsewhere."""

    def __init__(self, out: IO, *, live: bool | None = None, label: str = "") -> None:
        self.out = out
        self.live = _is_tty(out) if live is None else live
        self.label = label
        """Shown before the status (e.g. "scripted model"), so it is never forgotten."""
        self.task: str | None = None
        self.stage: str | None = None
        self.turn: int | None = None
        self.tokens: int | None = None
        self.streaming: Delta | None = None
        """The latest piece of the reply arriving now (None between model calls)."""
        self._status: Status | None = None
        self._last_key: tuple[Any, ...] | None = None
        self._since = time.monotonic()
        """When the status last changed (a model call starts after it): the line's clock."""

    # ---- Progress protocol -------------------------------------------------------------
    def status(
        self,
        *,
        task: str | None = None,
        stage: str | None = None,
        turn: int | None = None,
        tokens: int | None = None,
    ) -> None:
        """Update what is shown; a new task or stage clears the turn."""
        self.out.raise_if_closed()  # nobody reads us any more: stop as on Ctrl-C
        if task is not None and task != self.task:
            self.task, self.stage, self.turn = task, None, None
        if stage is not None and stage != self.stage:
            self.stage, self.turn = stage, None
        if turn is not None:
            self.turn = turn
        if tokens is not None:
            self.tokens = tokens
        self.streaming = None  # a status update comes between model calls
        self._since = time.monotonic()
        self._render()

    def on_delta(self, delta: Delta) -> None:
        """A piece of a streamed reply: the live count is redrawn (at most ~10 times a second)."""
        self.streaming = delta  # the status line shows it at its next refresh

    def note(self, text: str, style: str | None = None) -> None:
        """A notable line, printed above the status line."""
        self.out.say(text, style=style)
        self.out.raise_if_closed()

    def lanes(self) -> Lanes:
        """Where K attempts at once are shown: a live block on a TTY, prefixed lines elsewhere."""
        return LiveLanes(self) if self.live else Lanes(self)

    # ---- lifecycle ------------------------------------------------------------------------
    def start(self) -> TerminalProgress:
        if self.live and self._status is None:
            self._status = self.out.console.status(_Ticking(self), spinner="dots")
            self._status.start()
        return self

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def __enter__(self) -> TerminalProgress:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ---- rendering ------------------------------------------------------------------------
    def line(self) -> str:
        """The status as one line: ``T-001 · implementing · turn 3 · 4,210 tokens``."""
        parts = [self.label] if self.label else []
        if self.task:
            parts.append(self.task)
        if self.stage:
            parts.append(self.stage)
        if self.turn is not None:
            parts.append(f"turn {self.turn}")
        if self.tokens is not None:
            parts.append(f"{self.tokens:,} tokens")
        if self.streaming is not None:
            doing = "thinking" if self.streaming.kind == "reasoning" else "receiving"
            parts.append(f"{doing} {self.streaming.completion_tokens:,}")
        return " · ".join(parts) or "starting"

    def ticking_line(self) -> str:
        """``line()`` with how long the current step has taken, once it is over a second
        (a slow model's long prompt or reply shows as slow, not stuck)."""
        waited = time.monotonic() - self._since
        return self.line() + (f" · {_duration(waited)}" if waited >= 1 else "")

    def _render(self) -> None:
        text = self.line()
        if self._status is not None:
            return  # the status line re-reads ``ticking_line`` at every refresh
        # Plain lines only when task, stage or turn moves: a token update alone is not news.
        key = (self.task, self.stage, self.turn)
        if self.live or key == self._last_key:
            return
        self._last_key = key
        self.out.say(text, style="dim")


def _is_tty(out: IO) -> bool:
    stream: Any = out.stdout
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class LiveLanes(Lanes):
    """K attempts as a block of K lines redrawn in place below the notes (the run's own
    status line makes way for it meanwhile). Warnings still print above the block."""

    LOUD = frozenset({"yellow", "red", "bold red"})

    def __init__(self, progress: TerminalProgress) -> None:
        super().__init__(progress)
        self.progress = progress
        self._live: Live | None = None

    def moved(self, lane: Lane) -> None:
        """Drawn at the next redraw."""

    def noted(self, lane: Lane, text: str, style: str | None) -> None:
        if style in self.LOUD:
            super().noted(lane, text, style)

    def ended(self, lane: Lane) -> None:
        if self._live is not None:
            self._live.refresh()

    def block(self) -> RenderableType:
        """The lanes, one line each (text from a model neutralised, as every line is)."""
        from rich.console import Group
        from rich.text import Text

        with self.lock:
            lanes = list(self.lanes)
        return Group(
            *(
                Text(neutralise(lane.line()), style="dim" if lane.result else "", no_wrap=True)
                for lane in lanes
            )
        )

    def __enter__(self) -> LiveLanes:
        from rich.live import Live

        self.progress.stop()
        self._live = Live(
            console=self.progress.out.console,
            get_renderable=self.block,
            refresh_per_second=4,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.stop()  # the last drawing (every result line) stays on the screen
            self._live = None
        self.progress.start()


class _Ticking:
    """The status line's text, read afresh at every refresh (so its clock moves)."""

    def __init__(self, progress: TerminalProgress) -> None:
        self.progress = progress

    def __rich__(self) -> Any:
        from rich.text import Text

        return Text(self.progress.ticking_line())


def _duration(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60}m{whole % 60:02d}s" if whole >= 60 else f"{whole}s"
