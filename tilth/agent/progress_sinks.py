"""Progress sinks for runs without a terminal: one that shows nothing, one that remembers,
and the lanes K attempts at once are shown in.

Any object with ``status``, ``note`` and ``on_delta`` (``tilth.agent.run_context.Progress``)
can watch a run; the terminal's is ``tilth.ui.progress.TerminalProgress``. A sink that
can show K attempts at once offers ``lanes()`` (the terminal: a block of K lines redrawn
in place); any other gets ``Lanes``, one plain prefixed line per change (``lanes_for``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

from tilth.model.base import Delta
from tilth.model.call import CancelToken

if TYPE_CHECKING:
    from tilth.agent.run_context import Progress


class SilentProgress:
    """Shows nothing (a library run, a background run)."""

    def status(
        self,
        *,
        task: str | None = None,
        stage: str | None = None,
        turn: int | None = None,
        tokens: int | None = None,
    ) -> None:
        """Ignore a status change."""

    def note(self, text: str, style: str | None = None) -> None:
        """Ignore a notable line."""

    def on_delta(self, delta: Delta) -> None:
        """Ignore a piece of a streamed reply."""


@dataclass
class ProgressLog:
    """Remembers every status change, note and streamed piece (tests, web front ends)."""

    statuses: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    deltas: list[Delta] = field(default_factory=list)

    def status(
        self,
        *,
        task: str | None = None,
        stage: str | None = None,
        turn: int | None = None,
        tokens: int | None = None,
    ) -> None:
        """Remember a status change (only the fields given)."""
        given = {"task": task, "stage": stage, "turn": turn, "tokens": tokens}
        self.statuses.append({k: v for k, v in given.items() if v is not None})

    def note(self, text: str, style: str | None = None) -> None:
        """Remember a notable line."""
        self.notes.append(text)

    def on_delta(self, delta: Delta) -> None:
        """Remember a piece of a streamed reply."""
        self.deltas.append(delta)


class LineNotices:
    """A run's notices as plain lines to ``on_line`` (or nowhere): no terminal involved."""

    def __init__(self, on_line: Callable[[str], Any] | None = None) -> None:
        self.on_line = on_line

    def say(self, text: str = "", style: str | None = None) -> None:
        """Hand over a non-blank line."""
        if self.on_line is not None and text.strip():
            self.on_line(text)

    def dim(self, text: str) -> None:
        """Hand over a minor line."""
        self.say(text)

    def warn(self, text: str) -> None:
        """Hand over a warning, marked as one."""
        self.say(f"warning: {text}")

    def stdout_to_stderr(self) -> None:
        """Nothing to redirect."""


# ---- K attempts at once -------------------------------------------------------------------------
QUEUED = "queued, waiting for a place (--parallel)"
"""A lane's action until its attempt starts: the queue runs at most K at once."""


@dataclass
class Lane:
    """What one of K attempts is doing: the line it is shown as."""

    label: str
    task: str | None = None
    stage: str | None = None
    turn: int | None = None
    tokens: int | None = None
    action: str = QUEUED
    """Its last notable line (a stage passed, the gate running...); ``QUEUED`` until its
    attempt starts (``--parallel`` below ``--attempts`` keeps some waiting)."""
    result: str | None = None
    """How it ended; its line collapses to this."""
    started: float | None = None
    """When its attempt started running (None while it waits in the queue)."""
    ended: float | None = None

    def line(self, now: float | None = None) -> str:
        """``attempt 2/3 <id> · implementing · turn 3 · 4,210 tokens · 12s · <action>``;
        ``attempt 3/3 <id> · queued, waiting for a place`` before it starts."""
        if self.started is None:
            return f"{self.label} · {self.result or self.action}"
        elapsed = f"{int((self.ended or now or time.monotonic()) - self.started)}s"
        if self.result is not None:
            return f"{self.label} · {self.result} · {elapsed}"
        parts = [self.label]
        parts += [p for p in (self.task, self.stage) if p]
        if self.turn is not None:
            parts.append(f"turn {self.turn}")
        if self.tokens is not None:
            parts.append(f"{self.tokens:,} tokens")
        parts += [elapsed, self.action]
        return " · ".join(parts)


class Lanes:
    """K attempts shown at once as plain lines to a run's sink (CI, pipes, libraries): a
    stage change, a note or the end of an attempt is one line prefixed with the attempt.
    ``tilth.ui.progress.LiveLanes`` draws the same lanes as a block redrawn in place."""

    def __init__(self, shown: Progress) -> None:
        self.shown = shown
        self.lock = threading.Lock()
        self.lanes: list[Lane] = []

    def add(self, label: str, cancel: threading.Event | None = None) -> LaneProgress:
        """A lane for one attempt, and the sink its run reports to."""
        lane = Lane(label)
        with self.lock:
            self.lanes.append(lane)
        return LaneProgress(self, lane, cancel)

    def moved(self, lane: Lane) -> None:
        """``lane`` reached another task or stage."""
        self._say(lane, f"{lane.task or ''} {lane.stage}".strip(), "dim")

    def noted(self, lane: Lane, text: str, style: str | None) -> None:
        """``lane``'s attempt has a notable line."""
        self._say(lane, text, style)

    def ended(self, lane: Lane) -> None:
        """``lane``'s attempt stopped (``lane.result`` says how)."""
        self._say(lane, f"ended: {lane.result}", None)

    def _say(self, lane: Lane, text: str, style: str | None) -> None:
        with self.lock:
            self.shown.note(f"  [{lane.label}] {text}", style=style)

    def __enter__(self) -> Lanes:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Nothing to take down for plain lines."""


def lanes_for(shown: Progress) -> Lanes:
    """The lanes ``shown`` draws K attempts in: its own (``lanes()``), else plain lines."""
    make = getattr(shown, "lanes", None)
    made = make() if callable(make) else None
    return made if isinstance(made, Lanes) else Lanes(shown)


class EventCancel(CancelToken):
    """A ``CancelToken`` that is set when ``event`` is: the run's Ctrl-C, seen by a turn."""

    def __init__(self, event: threading.Event) -> None:
        super().__init__()
        self.event = event

    def cancel(self) -> None:
        self.event.set()

    @property
    def cancelled(self) -> bool:
        return self.event.is_set()


class LaneProgress:
    """One attempt's ``Progress``: what it reports updates its lane of ``Lanes``."""

    def __init__(self, lanes: Lanes, lane: Lane, cancel: threading.Event | None) -> None:
        self.lanes = lanes
        self.lane = lane
        self.cancel = cancel
        """Set when the run is interrupted: the attempt stops at its next step, as on Ctrl-C."""
        self.cancel_token = EventCancel(cancel) if cancel is not None else None
        """The same, for the attempt's turns: a model call in flight is abandoned at once
        (``RunContext.turn_options``), not waited for."""

    def status(
        self,
        *,
        task: str | None = None,
        stage: str | None = None,
        turn: int | None = None,
        tokens: int | None = None,
    ) -> None:
        """Update the lane (or stop the attempt: see ``cancel``); a new stage is news."""
        if self.cancel is not None and self.cancel.is_set():
            raise KeyboardInterrupt("the run was interrupted")
        lane = self.lane
        moved = (task or lane.task, stage or lane.stage) != (lane.task, lane.stage)
        if moved:
            lane.turn = None
        lane.task, lane.stage = task or lane.task, stage or lane.stage
        lane.turn = turn if turn is not None else lane.turn
        lane.tokens = tokens if tokens is not None else lane.tokens
        if moved and lane.stage:
            self.lanes.moved(lane)

    def note(self, text: str, style: str | None = None) -> None:
        """The attempt's notable line: its lane's last action."""
        self.lane.action = text.strip()
        self.lanes.noted(self.lane, self.lane.action, style)

    def on_delta(self, delta: Delta) -> None:
        """Streamed pieces are not shown for attempts (K of them at once)."""

    def begin(self) -> None:
        """The attempt starts running: its clock starts (time spent queued is not its own)."""
        self.lane.started = time.monotonic()
        self.lane.action = "starting"

    def end(self, result: str) -> None:
        """The attempt stopped: its lane collapses to ``result``."""
        self.lane.result = result
        self.lane.ended = time.monotonic()
        self.lanes.ended(self.lane)
