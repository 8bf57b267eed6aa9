"""A torn intent journal (``timeline/journal.json``): named, then finished or cancelled.

The journal is written atomically, so only a damaged disk or a hand edit tears it; then
every go-back and ``resume`` refuses until ``tilth doctor <id> --repair`` closes it. What
survived decides how: when the whole plan and its steps are still there, the operation
is finished (its steps are idempotent, as for any interrupted go-back); otherwise it is
cancelled and logged, and the worktree stays as it was left.
"""

from __future__ import annotations

import re
from pathlib import Path

from tilth.errors import SessionCorrupt
from tilth.health.problem import Problem
from tilth.session.events import utc_now
from tilth.session.migrations import upgrade
from tilth.session.store import Session
from tilth.timeline.rewind.executor import recover
from tilth.timeline.rewind.journal import (
    Journal,
    clear_journal,
    journal_path,
    log_operation,
    read_journal,
    read_operations,
    salvage_journal,
    write_journal,
)
from tilth.timeline.rewind.plan import RewindPlan


def journal_problems(session: Session) -> list[Problem]:
    """The torn journal of an interrupted go-back, with how it will be closed."""
    try:
        read_journal(session)
        return []
    except SessionCorrupt as exc:
        what = f"the journal of an interrupted go-back is torn ({exc.message})"
    finishable = _finishable(session)
    if _logged(session, _op_id(session)):
        fix = "remove the torn journal: the operations log records that its go-back finished"
    elif finishable is not None:
        fix = (
            f"finish the interrupted {finishable.plan.get('op', 'go-back')} {finishable.op_id}: "
            "the journal still holds its whole plan"
        )
    else:
        fix = (
            "cancel the interrupted go-back and log it (the journal lost its plan; the "
            "worktree stays as it was left)"
        )
    return [Problem("journal", what, fix)]


def _finishable(session: Session) -> Journal | None:
    """The torn journal's operation when enough of it survived to finish it."""
    journal = salvage_journal(session)
    if journal is None or _logged(session, journal.op_id):
        return None
    try:
        plan = RewindPlan.from_dict(upgrade("plan", journal.plan))
    except (SessionCorrupt, KeyError, TypeError, ValueError, AttributeError):
        return None
    return journal if plan.op_id == journal.op_id else None


def close_journal(session: Session, source: Path | None) -> str:
    """Finish the torn journal's operation when it can be, else cancel it (lock held)."""
    journal = _finishable(session)
    if journal is not None:
        write_journal(session, journal)  # whole again: recovery runs the steps not done
        said = recover(session) or "the interrupted go-back had finished"
        if session.events.path.exists():
            session.log("journal_repaired", op_id=journal.op_id, finished=True)
        return f"{said} (from its torn journal)"
    op_id = _op_id(session) or f"torn-{utc_now()}"
    finished = _logged(session, op_id)
    if not finished:
        log_operation(session, op_id, "unknown", outcome="abandoned", reason="torn journal")
    clear_journal(session)
    if session.events.path.exists():
        session.log("journal_repaired", op_id=op_id, finished=finished)
    if finished:
        return f"the interrupted go-back {op_id} had finished; removed its torn journal"
    return (
        f"cancelled the interrupted go-back {op_id} (its journal was torn); the worktree "
        f"is as it was left: `tilth checkpoints {session.id}` shows where you can go back to"
    )


def _op_id(session: Session) -> str | None:
    """The op id a torn journal still names, if any."""
    raw = journal_path(session).read_bytes()
    found = re.search(rb'"op_id"\s*:\s*"([^"\\]{1,200})"', raw)
    return found.group(1).decode("utf-8", "replace") if found else None


def _logged(session: Session, op_id: str | None) -> bool:
    """True when the operations log records ``op_id`` (it finished, or was cancelled)."""
    return op_id is not None and any(e.get("op_id") == op_id for e in read_operations(session))
