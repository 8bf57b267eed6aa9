"""Records that evolve: every persisted record carries its schema number, and older ones
are brought up to date on read by a numbered list of migrations (llm's habit).

A migration names the record kind it applies to and the schema it produces; ``upgrade``
runs, in number order, each migration of that kind whose schema is above the record's.
A record written by a newer Tilth (a schema above every known one) is refused with a
message saying so, never misread. Migrations never write: the upgraded record is
persisted the next time its owner writes it.

The kinds, their current schemas and their version keys are the one table in
``tilth.session.schemas`` (which the writers stamp from too): a migration may not reach
past its kind's current schema, and the highest one of a kind reaches it exactly.
Records numbered with the old line key ``v`` (task states, and line records written
before the key was unified) are read as numbered by it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tilth.errors import SessionCorrupt
from tilth.session.schemas import OLD_LINE_KEY, SCHEMAS, version_key

Record = dict[str, Any]


@dataclass(frozen=True)
class Migration:
    """One step: records of ``kind`` below ``schema`` get ``apply``'d and reach ``schema``."""

    number: int
    kind: str
    schema: int
    what: str
    apply: Callable[[Record], Record]


def _session_kind(record: Record) -> Record:
    # Sessions before chat existed were all run by the loop (kind "run").
    return {**record, "kind": record.get("kind") or "run"}


def _checkpoint_archive(record: Record) -> Record:
    # Undo points arrived with schema 2: older checkpoints are never one.
    return {**record, "archive": record.get("archive")}


def _checkpoint_state_blobs(record: Record) -> Record:
    # Schema 3 files may name the prd and task states by blob id (``state_blobs``); older
    # ones hold them inline, which is what a file without ``state_blobs`` means.
    return {k: v for k, v in record.items() if k != "state_blobs"}


def _plan_undo_fields(record: Record) -> Record:
    # Plans journaled before undo: no undo point, no exact drop list (the executor then
    # deletes every checkpoint after the target, as it did), no unwind, no fork.
    defaults: Record = {
        "before": None,
        "before_seq": None,
        "drop_seqs": [],
        "keep_seqs": None,
        "archive": None,
        "event_cut": None,
        "unwind": None,
        "fork": None,
        "snapshot_code": False,
    }
    return {**defaults, **record}


def _task_schema_key(record: Record) -> Record:
    # Task states numbered themselves with the line records' ``v``; JSON files say ``schema``.
    return {k: v for k, v in record.items() if k != "v"}


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "session", 2, "checkpoint.json gains kind (run or chat)", _session_kind),
    Migration(2, "checkpoint", 2, "checkpoints gain archive (undo points)", _checkpoint_archive),
    Migration(3, "plan", 2, "plans gain the undo, resume and fork fields", _plan_undo_fields),
    Migration(4, "task", 2, "tasks/<T>.json numbers itself with schema, not v", _task_schema_key),
    Migration(
        5,
        "checkpoint",
        3,
        "checkpoint files name the prd and task states by blob id (state_blobs)",
        _checkpoint_state_blobs,
    ),
)

CURRENT: dict[str, int] = SCHEMAS
"""Each kind's current schema: the table in ``tilth.session.schemas`` itself."""


def schema_of(record: Record, kind: str = "") -> int:
    """The schema number ``record`` carries (1 when it carries none, or garbage)."""
    key = version_key(kind) if kind else "schema"
    value = record.get(key, record.get(OLD_LINE_KEY, 1))
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def upgrade(kind: str, record: Record, *, where: str = "") -> Record:
    """``record`` brought to the current schema of ``kind`` (a new dict; never written)."""
    found = schema_of(record, kind)
    current = SCHEMAS[kind]
    if found > current:
        raise SessionCorrupt(
            f"{where or kind} was written by a newer Tilth (schema {found}; this one reads "
            f"up to {current})",
            hint="upgrade Tilth to open it",
        )
    out = dict(record)
    if found == current:
        return out  # the common case: nothing to run
    for migration in sorted(MIGRATIONS, key=lambda m: m.number):
        if migration.kind == kind and schema_of(out, kind) < migration.schema:
            out = migration.apply(out)
            out[version_key(kind)] = migration.schema
    return out
