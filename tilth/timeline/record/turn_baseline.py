"""The state the git capture compares a turn against: the end of the previous turn.

Kept in ``timeline/capture-state.json`` for the next process, so that a resumed session's
first turn reports what changed since the last turn recorded, not every file that differs
from HEAD.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from tilth.session.store import Session
from tilth.timeline.record.blob_store import Entry
from tilth.timeline.record.git_reads import GitId

STATE_FILE = "capture-state.json"
"""The last turn's end state (overlay, git ids, oversize files), for the next process."""


@dataclass
class Baseline:
    """The captured state at the end of the previous turn (or at start)."""

    head: str
    overlay: dict[str, Entry | None] = field(default_factory=dict)
    ids: dict[str, GitId | None] = field(default_factory=dict)
    """Git ids of the overlay's paths, so states compare without reading blobs back."""
    oversize: dict[str, GitId] = field(default_factory=dict)
    """Files over the size cap (not stored) and their git ids when last reported."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "head": self.head,
            "overlay": self.overlay,
            "ids": {k: list(v) if v else None for k, v in self.ids.items()},
            "oversize": {k: list(v) for k, v in self.oversize.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Baseline:
        def pair(value: Any) -> GitId | None:
            return (str(value[0]), str(value[1])) if isinstance(value, list) else None

        oversize = {k: pair(v) for k, v in (data.get("oversize") or {}).items()}
        return cls(
            str(data.get("head") or ""),
            dict(data.get("overlay") or {}),
            {k: pair(v) for k, v in (data.get("ids") or {}).items()},
            {k: v for k, v in oversize.items() if v is not None},
        )


def save_baseline(session: Session | None, baseline: Baseline) -> None:
    """Keep a turn's end state for the next process (no fsync: losing it only makes that
    process's first turn report more)."""
    if session is None:
        return
    path = session.dir / "timeline" / STATE_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(baseline.to_dict()), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


def saved_baseline(session: Session | None, head: str) -> Baseline:
    """The previous process's last turn, when it ended on ``head``; else an empty one."""
    if session is not None:
        path = session.dir / "timeline" / STATE_FILE
        try:
            saved = Baseline.from_dict(json.loads(path.read_text("utf-8")))
        except (OSError, ValueError, AttributeError):
            saved = None
        if saved is not None and saved.head == head:
            return saved
    return Baseline(head)
