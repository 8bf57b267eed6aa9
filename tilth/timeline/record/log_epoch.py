"""The event log's epoch: a number that goes up with every cut of ``events.jsonl``.

A cut (rewind, restart, reset to the seed, undo; a log that repair had to restart) makes
``seq`` start over where the log was cut, so a ``seq`` alone may name two different
events, one before the cut and one after it. The epoch, kept in
``timeline/events-epoch.json`` (which no go-back restores), counts the cuts: ``(epoch,
seq)`` names one event for good. ``tilth serve`` sends it as each event's SSE id.

The order matters to a reader that follows the log without the lock: the epoch goes up
after the log is cut and before anything is appended past the cut, so lines read between
two reads of an unchanged epoch belong to that epoch. Raising it is idempotent per
operation (``op``): a go-back a crash interrupted and recovery finished raises it once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tilth.session.files import atomic_write_json, read_at

EPOCH_FILE = "events-epoch.json"
SCHEMA = 1


def epoch_path(session_dir: Path) -> Path:
    """``sessions/<id>/timeline/events-epoch.json``."""
    return session_dir / "timeline" / EPOCH_FILE


RECORD_BYTES = 4096
"""The record is a few dozen bytes; a file longer than this is not one (read as epoch 0)."""


def _record(session_dir: Path) -> dict[str, Any]:
    try:  # every follower of a served session reads this at every change: no file object
        raw, size = read_at(epoch_path(session_dir), 0, RECORD_BYTES)
        data = json.loads(raw) if size <= RECORD_BYTES else None
    except (OSError, ValueError):  # missing (never cut), or unreadable: start from 0
        return {}
    return data if isinstance(data, dict) else {}


def read_epoch(session_dir: Path) -> int:
    """How many times the session's event log was cut (0: never)."""
    value = _record(session_dir).get("epoch")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def raise_epoch(session_dir: Path, op: str) -> int:
    """Count one cut of the log by operation ``op`` (once per ``op``); the new epoch."""
    record = _record(session_dir)
    epoch = read_epoch(session_dir)
    if record.get("op") == op:
        return epoch
    epoch += 1
    epoch_path(session_dir).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(epoch_path(session_dir), {"schema": SCHEMA, "epoch": epoch, "op": op})
    return epoch
