"""The intent journal and the operations log.

``timeline/journal.json`` is written (atomically) before the first mutation of a
go-back operation. It holds the full plan, the first step that started (from
then on recovery rolls forward) and the steps that finished.
``timeline/operations.jsonl`` is an append-only record of every rewind, restart,
reset-to-seed and fork; unlike ``events.jsonl`` it is never cut, so it still
remembers operations that erased the events around them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilth.errors import SessionCorrupt
from tilth.session.events import read_json_objects, utc_now
from tilth.session.files import (
    append_line,
    atomic_write_json,
    atomic_write_text,
    fsync_dir,
    read_json,
)
from tilth.session.schemas import SCHEMAS
from tilth.session.store import Session
from tilth.session.validate import journal_problem
from tilth.timeline.record.checkpoints import timeline_dir

JOURNAL_SCHEMA = SCHEMAS["journal"]
OPS_SCHEMA = SCHEMAS["ops"]


def journal_path(session: Session) -> Path:
    return timeline_dir(session) / "journal.json"


def operations_path(session: Session) -> Path:
    return timeline_dir(session) / "operations.jsonl"


@dataclass
class Journal:
    """One operation in flight: its plan and the progress of its steps."""

    op_id: str
    plan: dict[str, Any]
    steps: list[str]
    started: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": JOURNAL_SCHEMA,
            "op_id": self.op_id,
            "plan": self.plan,
            "steps": self.steps,
            "started": self.started,
            "done": self.done,
        }


def write_journal(session: Session, journal: Journal, *, flush_dir: bool = True) -> None:
    """Persist the journal atomically (the commit point of each step transition);
    ``flush_dir`` False leaves the rename's directory entry to the next flushed write."""
    atomic_write_json(journal_path(session), journal.to_dict(), flush_dir=flush_dir)


def read_journal(session: Session) -> Journal | None:
    """The journal of an interrupted operation, or None when nothing is in flight."""
    path = journal_path(session)
    hint = f"`tilth doctor {session.id} --repair` finishes or cancels what it recorded"
    try:
        data = read_json(path, what="timeline journal")
    except FileNotFoundError:
        return None
    except SessionCorrupt as exc:
        raise SessionCorrupt(exc.message, hint=hint) from None
    problem = journal_problem(data)
    if problem is not None:
        raise SessionCorrupt(f"the rewind journal {path} is not readable: {problem}", hint=hint)
    return Journal(
        op_id=str(data.get("op_id", "")),
        plan=data["plan"],
        steps=[str(s) for s in data.get("steps", [])],
        started=[str(s) for s in data.get("started", [])],
        done=[str(s) for s in data.get("done", [])],
    )


def salvage_journal(session: Session) -> Journal | None:
    """What a torn journal still records in full: its op id, its whole plan and its steps
    (with the steps it had started and finished, as far as those survived); None when any
    of the first three is cut or damaged, so the operation cannot be finished from it."""
    try:
        raw = journal_path(session).read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    fields = _whole_fields(raw)
    op_id, plan, steps = fields.get("op_id"), fields.get("plan"), fields.get("steps")
    if not isinstance(op_id, str) or not op_id or not isinstance(plan, dict):
        return None
    if not isinstance(steps, list) or not steps or not all(isinstance(s, str) for s in steps):
        return None
    started: Any = fields.get("started")
    done: Any = fields.get("done")
    if not _names(started):
        # Cut before it said whether a step had started: the steps are idempotent, so
        # finishing is safe either way, and it is what the command was asked to do.
        return Journal(op_id, plan, list(steps), [steps[0]], [])
    return Journal(op_id, plan, list(steps), list(started), list(done) if _names(done) else [])


def _names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _whole_fields(raw: str) -> dict[str, Any]:
    """The top-level fields of a JSON object whose values are complete, read from its start
    until the text is cut or stops making sense (a torn file's surviving prefix)."""
    decoder = json.JSONDecoder()
    fields: dict[str, Any] = {}
    at = _skip(raw, 0)
    if not raw.startswith("{", at):
        return fields
    at += 1
    while True:
        try:
            at = _skip(raw, at)
            key, at = decoder.raw_decode(raw, at)
            at = _skip(raw, at)
            if not raw.startswith(":", at):
                return fields
            value, at = decoder.raw_decode(raw, _skip(raw, at + 1))
        except (json.JSONDecodeError, RecursionError):
            return fields
        if not isinstance(key, str):
            return fields
        fields[key] = value
        at = _skip(raw, at)
        if not raw.startswith(",", at):
            return fields
        at += 1


def _skip(raw: str, at: int) -> int:
    while at < len(raw) and raw[at] in " \t\r\n":
        at += 1
    return at


def clear_journal(session: Session) -> None:
    path = journal_path(session)
    path.unlink(missing_ok=True)
    fsync_dir(path.parent)


# ---- operations log ---------------------------------------------------------------------------
def read_operations(session: Session) -> list[dict[str, Any]]:
    """Every readable entry of the operations log, oldest first."""
    return read_json_objects(operations_path(session))


def keep_operations(session: Session, kind: str) -> None:
    """Rewrite the operations log with only its entries of ``kind`` (a reset to the seed
    keeps the record of resets and erases the rest of the run's go-backs)."""
    path = operations_path(session)
    if not path.exists():
        return
    kept = [entry for entry in read_operations(session) if entry.get("kind") == kind]
    lines = "".join(json.dumps(e, ensure_ascii=False, default=str) + "\n" for e in kept)
    atomic_write_text(path, lines)


def log_operation(session: Session, op_id: str, kind: str, **fields: Any) -> bool:
    """Append one entry unless ``op_id`` is already logged; True when it appended."""
    if any(entry.get("op_id") == op_id for entry in read_operations(session)):
        return False
    record = {"schema": OPS_SCHEMA, "ts": utc_now(), "op_id": op_id, "kind": kind, **fields}
    path = operations_path(session)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, ensure_ascii=False, default=str)
    if path.exists() and path.stat().st_size and not path.read_bytes().endswith(b"\n"):
        line = "\n" + line  # a torn last line stays a (skipped) line of its own
    append_line(path, line)
    return True
