"""Pruning the durable queue's database: DBOS keeps every finished workflow (its status,
input and result, ~21 kB a session with attempts) for ever; these are deleted once they
ended ``TILTH_QUEUE_KEEP_DAYS`` ago or are past the newest ``KEEP_WORKFLOWS``, through
DBOS's own ``delete_workflows`` (it has no garbage collection of its own in this version).

Never a workflow still pending or enqueued, nor an undecided attempt's: a resume of its
parent asks DBOS for that workflow again (its result, when the attempt's task is over).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tilth.attempts import engine
from tilth.attempts.spend import undecided
from tilth.config import Settings
from tilth.errors import TilthError
from tilth.session.store import Session

KEEP_WORKFLOWS = 1000
"""At most this many finished workflows are kept (the newest), whatever their age."""
_BATCH = 500
"""Workflows deleted in one statement."""


def prune(*, days: int, keep: int = KEEP_WORKFLOWS) -> list[str]:
    """Delete the finished workflows that ended more than ``days`` ago or are past the newest
    ``keep``; the ids deleted.

    Never one still pending or enqueued, nor an undecided attempt's: a resume of its parent
    asks for that workflow again (its result, when the attempt's task is over)."""
    cutoff = (datetime.now(UTC) - timedelta(days=days)).isoformat()
    found = {
        status.workflow_id: status
        for status in [*engine.finished(ended_before=cutoff), *engine.finished(past=keep)]
    }
    parents: dict[str, set[str] | None] = {}
    doomed = [wid for wid, status in found.items() if not _awaited(status, parents)]
    for at in range(0, len(doomed), _BATCH):
        engine.delete(doomed[at : at + _BATCH])
    return doomed


def _awaited(status: Any, parents: dict[str, set[str] | None]) -> bool:
    """True when ``status`` is the workflow of an attempt its parent has not decided yet
    (``parents`` caches each parent's undecided attempts; None: its records cannot be read
    now, so all its attempts are kept)."""
    args = status.input.get("args") if isinstance(status.input, dict) else None
    if not args or len(args) < 2:
        return False
    session = Session(str(args[0]), Path(str(args[1])) / str(args[0]))
    try:
        record = session.record().extra.get("attempt") if session.dir.is_dir() else None
    except TilthError:
        return True  # unreadable now (being written, damaged): kept, looked at next time
    if not isinstance(record, dict) or not record.get("parent"):
        return False
    parent_id = str(record["parent"])
    if parent_id not in parents:
        parent = Session(parent_id, session.dir.parent / parent_id)
        try:
            found = undecided(parent) if parent.dir.is_dir() else None
            parents[parent_id] = {a.id for a in found.attempts} if found is not None else set()
        except (OSError, TilthError):
            parents[parent_id] = None
    awaited = parents[parent_id]
    return awaited is None or session.id in awaited


def tidy(settings: Settings) -> None:
    """``prune`` by ``settings`` (``TILTH_QUEUE_KEEP_DAYS``), at a moment that costs the work
    nothing: a worker's start (and hourly), a task's attempts all ended."""
    try:
        prune(days=settings.queue_keep_days)
    except Exception:  # housekeeping: a failure costs only the space, tried again next time
        return
