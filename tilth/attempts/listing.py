"""What ``tilth attempts`` and the web UI show: each task's attempts, their figures, the
winner and why, read from the parent's ``attempt_selected`` events and the attempt
sessions themselves (one still running has no figures yet)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tilth.session.events import payloads_of
from tilth.session.store import Session

WINNER, LOST, RUNNING = "winner", "lost", "running"


@dataclass
class AttemptRow:
    """One attempt at one task."""

    task_id: str
    session: str
    number: int
    state: str
    """``winner``, ``lost`` or ``running`` (not decided yet)."""
    figures: dict[str, Any] = field(default_factory=dict)
    checkpoint: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``tilth attempts --json``, the web API)."""
        return {
            "task_id": self.task_id,
            "session": self.session,
            "number": self.number,
            "state": self.state,
            "checkpoint": self.checkpoint,
            **{k: v for k, v in self.figures.items() if k != "session"},
        }


def _children(parent: Session) -> dict[str, dict[str, Any]]:
    """Attempt sessions of ``parent`` by id: their ``attempt`` records."""
    found: dict[str, dict[str, Any]] = {}
    if not parent.dir.parent.is_dir():
        return found
    for path in sorted(parent.dir.parent.iterdir()):
        record_path = path / "checkpoint.json"
        if not record_path.is_file():
            continue
        record = Session(path.name, path).checkpoint().get("attempt")
        if isinstance(record, dict) and record.get("parent") == parent.id:
            found[path.name] = record
    return found


def attempt_sessions(parent: Session) -> list[Session]:
    """The attempt sessions ``parent`` made (deleted with it)."""
    return [Session(i, parent.dir.parent / i) for i in _children(parent)]


def list_attempts(parent: Session, task_id: str | None = None) -> list[AttemptRow]:
    """Every attempt ``parent`` made (at ``task_id``), task by task, in attempt order.

    A later decision for the same task (a ``--pick``, a second round) wins over an
    earlier one."""
    children = _children(parent)
    decided: dict[str, dict[str, Any]] = {}
    for payload in payloads_of(parent.events.path, "attempt_selected"):
        for item in payload.get("attempts") or []:
            if isinstance(item, dict) and item.get("session"):
                decided[str(item["session"])] = {
                    **item,
                    "_winner": payload.get("winner"),
                    "_task": payload.get("task_id"),
                    "_checkpoint": payload.get("checkpoint"),
                }
    rows: list[AttemptRow] = []
    for session_id, record in children.items():
        task = str(record.get("task_id") or "")
        if task_id is not None and task != task_id:
            continue
        figures = decided.get(session_id)
        if figures is None:
            state = RUNNING
            shown: dict[str, Any] = {}
        else:
            state = WINNER if figures["_winner"] == session_id else LOST
            shown = {k: v for k, v in figures.items() if not k.startswith("_")}
        rows.append(
            AttemptRow(
                task_id=task,
                session=session_id,
                number=int(record.get("number") or 0),
                state=state,
                figures=shown,
                checkpoint=str(record.get("checkpoint") or "") or None,
            )
        )
    rows.sort(key=lambda r: (r.task_id, r.checkpoint or "", r.number, r.session))
    return rows


def summary_lines(session: Session) -> list[str]:
    """The summary's lines for best-of-N tasks: each attempt's figures, the winner marked."""
    lines: list[str] = []
    for payload in payloads_of(session.events.path, "attempt_selected"):
        for item in payload.get("attempts") or []:
            mark = "★" if item.get("session") == payload.get("winner") else " "
            lines.append(
                f"attempts  {payload.get('task_id')} {mark} {item.get('session')}: "
                f"{'passed' if item.get('passed') else 'failed'}, "
                f"{'accepted' if item.get('accepted') else 'not accepted'}, "
                f"{item.get('failed_gates')} failed gate(s), {item.get('diff_lines')} diff "
                f"line(s), {item.get('tokens')} token(s)"
            )
    return lines
