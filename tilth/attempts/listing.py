"""What ``tilth attempts`` and the web UI show: each task's attempts, their figures, the
winner and why, read from the parent's ``attempt_selected`` events; an attempt not decided
yet has no figures, only what is known so far (``progress``), read from its own session."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tilth.attempts.progress import SoFar, so_far
from tilth.attempts.spend import Undecided, undecided
from tilth.errors import TilthError
from tilth.session.events import payloads_of
from tilth.session.store import Session
from tilth.timeline.record.checkpoints import resolve_checkpoint

WINNER, LOST, RUNNING = "winner", "lost", "running"


@dataclass
class AttemptRow:
    """One attempt at one task."""

    task_id: str
    session: str
    number: int
    state: str
    """``winner``, ``lost`` or ``running`` (not decided yet, whether it runs or stopped:
    ``so_far`` says which)."""
    figures: dict[str, Any] = field(default_factory=dict)
    """The decided figures (``attempt_selected``); empty until then."""
    checkpoint: str | None = None
    so_far: SoFar | None = None
    """An undecided attempt's progress (None once decided)."""

    @property
    def decided(self) -> bool:
        return self.state != RUNNING

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``tilth attempts --json``, the web API): the decided figures at
        the top level, an undecided attempt's progress under ``so_far`` only."""
        return {
            "task_id": self.task_id,
            "session": self.session,
            "number": self.number,
            "state": self.state,
            "checkpoint": self.checkpoint,
            **{k: v for k, v in self.figures.items() if k != "session"},
            "decided": self.decided,
            "so_far": self.so_far.to_dict() if self.so_far is not None else None,
        }


def list_attempts(parent: Session, task_id: str | None = None) -> list[AttemptRow]:
    """Every attempt ``parent`` made (at ``task_id``), task by task, in attempt order.

    Read from the parent's own log: ``attempts_started`` names them, ``attempt_selected``
    decides them; a later decision for the same task (a ``--pick``, a second round) wins
    over an earlier one. Only an undecided attempt's own session is opened (``so_far``)."""
    rows: dict[str, AttemptRow] = {}
    for payload in payloads_of(parent.events.path, "attempts_started"):
        task = str(payload.get("task_id") or "")
        for number, session_id in enumerate(payload.get("attempts") or [], 1):
            rows[str(session_id)] = AttemptRow(
                task_id=task,
                session=str(session_id),
                number=number,
                state=RUNNING,
                checkpoint=str(payload.get("checkpoint") or "") or None,
            )
    for payload in payloads_of(parent.events.path, "attempt_selected"):
        task = str(payload.get("task_id") or "")
        for number, item in enumerate(payload.get("attempts") or [], 1):
            if not isinstance(item, dict) or not item.get("session"):
                continue
            session_id = str(item["session"])
            row = rows.get(session_id) or AttemptRow(task, session_id, number, RUNNING)
            row.state = WINNER if payload.get("winner") == session_id else LOST
            row.figures = dict(item)
            row.checkpoint = str(payload.get("checkpoint") or "") or row.checkpoint
            rows[session_id] = row
    found = [r for r in rows.values() if task_id is None or r.task_id == task_id]
    found.sort(key=lambda r: (r.task_id, r.checkpoint or "", r.number, r.session))
    bases: dict[str, int] = {}
    run_on = any(not r.decided for r in found) and parent.lock().owner()[1]
    for row in found:
        if not row.decided:
            base = bases.setdefault(row.checkpoint or "", _tokens_at(parent, row.checkpoint))
            attempt = Session(row.session, parent.dir.parent / row.session)
            row.so_far = so_far(attempt, row.task_id, base, run_on)
    return found


def _tokens_at(parent: Session, checkpoint: str | None) -> int:
    """The parent's token count at the attempts' fork point (where each one's began)."""
    try:
        tokens = resolve_checkpoint(parent, checkpoint or "").state.get("tokens_used")
    except TilthError:
        tokens = None
    return tokens if isinstance(tokens, int) else parent.tokens_used


def summary_lines(session: Session) -> list[str]:
    """The summary's lines for best-of-N tasks: each attempt's figures, the winner marked;
    attempts not decided yet (a stop cut them short) with what they have spent."""
    lines: list[str] = []
    for payload in payloads_of(session.events.path, "attempt_selected"):
        for item in payload.get("attempts") or []:
            mark = "★" if item.get("session") == payload.get("winner") else " "
            lines.append(
                f"attempts  {payload.get('task_id')} {mark} {item.get('session')}: "
                f"{'passed' if item.get('passed') else 'failed'}, "
                f"{'accepted' if item.get('accepted') else 'not accepted'}, "
                f"{item.get('failed_gates')} failed gate(s), {item.get('diff_lines')} diff "
                f"line(s), {int(item.get('tokens') or 0):,} token(s)"
            )
    found = undecided(session)
    return lines + (_undecided_lines(found) if found is not None else [])


def _undecided_lines(found: Undecided) -> list[str]:
    """An undecided attempt's line: what ``tilth attempts`` shows of it (``so_far.summary``:
    its status, stage, turns, latest gate and tokens so far)."""
    return [
        f"attempts  {found.task_id} · {attempt.id}: "
        + so_far(attempt, found.task_id, found.base).describe()
        for attempt in found.attempts
    ]
