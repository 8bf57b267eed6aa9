"""Progress sinks for runs without a terminal: one that shows nothing, one that remembers.

Any object with ``status``, ``note`` and ``on_delta`` (``tilth.agent.run_context.Progress``)
can watch a run; the terminal's is ``tilth.ui.progress.TerminalProgress``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tilth.model.base import Delta


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
