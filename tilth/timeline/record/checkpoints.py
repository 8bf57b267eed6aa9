"""Checkpoints on disk: one JSON file each, listing, resolving references, deleting a tail.

A checkpoint lives in ``sessions/<id>/timeline/checkpoints/cp-NNNN.json``. One
file per checkpoint keeps a delete cheap and means a corrupt file loses only
itself. Sequence numbers are never reused: before checkpoints are deleted,
``timeline/seq`` records the highest number handed out, so a checkpoint recorded
after a rewind gets a fresh id even though the ids after the target are gone.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import Any

from tilth.errors import SessionCorrupt, UsageError
from tilth.session.files import atomic_write_json, atomic_write_text, read_json
from tilth.session.migrations import upgrade
from tilth.session.schemas import SCHEMAS
from tilth.session.store import Session
from tilth.timeline.record.blob_store import BlobStore, session_store
from tilth.timeline.record.stored_state import (
    BLOBS_KEY,
    StoredState,
    resolve_state,
    store_state,
    stored_keys,
    worth_storing,
)

CHECKPOINT_FILE_SCHEMA = SCHEMAS["checkpoint"]
KINDS = ("seed", "task_start", "stage", "turn", "stop")
BEFORE_PREFIX = "before-"
"""Kinds ``before-rewind``, ``before-restart``...: the state just before a go-back (undo)."""
_FILE_RE = re.compile(r"^cp-(\d+)\.json$")
_TASK_RE = re.compile(r"^T-\d{3,}$")


@dataclass
class Checkpoint:
    """One place on the session's timeline: code, conversation and harness state."""

    id: str
    seq: int
    kind: str
    ts: str
    label: str
    task_id: str | None
    stage: str | None
    turn: int | None
    actor: str | None
    head: str
    event_offset: int
    event_seq: int
    state: dict[str, Any]
    threads: dict[str, str | None]
    overlay: dict[str, str | None] = field(default_factory=dict)
    files_changed: list[str] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)
    archive: str | None = None
    """``before-`` checkpoints: the session-relative undo archive (log tail, threads...)."""
    _stored: StoredState | None = field(default=None, init=False, repr=False, compare=False)
    """How its file holds ``state`` (blob ids), once read or written; not stored itself."""

    @property
    def is_before(self) -> bool:
        """True for the state recorded just before a go-back (what undo returns to)."""
        return self.kind.startswith(BEFORE_PREFIX)

    def summary(self) -> dict[str, Any]:
        """What front ends show of it (``checkpoints --json``, the web API): no stored state."""
        return {
            "id": self.id,
            "seq": self.seq,
            "ts": self.ts,
            "kind": self.kind,
            "task_id": self.task_id,
            "stage": self.stage,
            "turn": self.turn,
            "actor": self.actor,
            "label": self.label,
            "where": self.where,
            "head": self.head,
            "files_changed": self.files_changed,
            "gaps": self.gaps,
        }

    def to_dict(self) -> dict[str, Any]:
        """The stored JSON object (with its schema version). It shares this checkpoint's
        values, never a deep copy: the harness state, most of a checkpoint, holds every
        task's state, and copying it took a run of 35 tasks 11 s of its 36 s of recording."""
        values = {name: getattr(self, name) for name in _field_order()}
        return {"schema": CHECKPOINT_FILE_SCHEMA, **values}

    @classmethod
    def from_dict(
        cls, data: Any, store: BlobStore | None = None, *, resolve: bool = True
    ) -> Checkpoint:
        """Parse a stored object; raises ``ValueError`` on a malformed one.

        A file's object that names its state by blob id (``state_blobs``) needs ``store``,
        the session's snapshot store (``read_checkpoint`` passes it); ``to_dict``'s never does.
        ``resolve=False`` leaves such a state as the file holds it (blob ids), for readers
        that never look at it (retention).
        """
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        data = upgrade("checkpoint", data, where=f"checkpoint {data.get('id', '?')}")
        keys = stored_keys(data)
        stored: StoredState | None = None
        if keys:
            if store is None:
                raise ValueError("its state is in the snapshot store; read it with its session")
            on_disk = data.get("state")
            if not isinstance(on_disk, dict):
                raise ValueError("state is not an object")
            resolved = resolve_state(on_disk, keys, store) if resolve else None
            stored = StoredState(on_disk, keys, store.root, resolved)
            data = {**data, "state": on_disk if resolved is None else resolved}
        names = _field_names()
        missing = [n for n in ("id", "seq", "kind", "head", "event_offset") if n not in data]
        if missing:
            raise ValueError(f"missing field(s) {', '.join(missing)}")
        values = {k: v for k, v in data.items() if k in names}
        values.setdefault("ts", "")
        values.setdefault("label", "")
        for key in ("task_id", "stage", "turn", "actor"):
            values.setdefault(key, None)
        values.setdefault("event_seq", 0)
        values.setdefault("state", {})
        values.setdefault("threads", {})
        if not isinstance(values["seq"], int) or not isinstance(values["event_offset"], int):
            raise ValueError("seq and event_offset must be integers")
        checkpoint = cls(**values)
        checkpoint._stored = stored
        return checkpoint

    def state_blobs(self) -> set[str]:
        """The blob ids its file names for its state (prd and task states)."""
        return self._stored.blobs() if self._stored is not None else set()

    @property
    def where(self) -> str:
        """``T-001/planning turn 3`` style position, for listings."""
        parts = [p for p in (self.task_id, self.stage) if p]
        text = "/".join(parts)
        if self.turn is not None:
            text = f"{text} turn {self.turn}".strip()
        return text or "-"


@cache
def _field_names() -> frozenset[str]:
    return frozenset(_field_order())


@cache
def _field_order() -> tuple[str, ...]:
    return tuple(f.name for f in fields(Checkpoint) if not f.name.startswith("_"))


def checkpoint_id(seq: int) -> str:
    """The stable id of sequence number ``seq``."""
    return f"cp-{seq:04d}"


def timeline_dir(session: Session) -> Path:
    """``sessions/<id>/timeline``."""
    return session.dir / "timeline"


def checkpoints_dir(session: Session) -> Path:
    return timeline_dir(session) / "checkpoints"


def checkpoint_path(session: Session, seq: int) -> Path:
    return _checkpoint_file(checkpoints_dir(session), seq)


def _checkpoint_file(folder: Path, seq: int) -> Path:
    return folder / f"{checkpoint_id(seq)}.json"


def stored_seqs(session: Session) -> list[int]:
    """Sequence numbers of the checkpoint files present, ascending (no parsing)."""
    try:
        names = os.listdir(checkpoints_dir(session))
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for n in names if (m := _FILE_RE.match(n)))


def _seq_counter_path(session: Session) -> Path:
    return timeline_dir(session) / "seq"


def highest_seq(session: Session) -> int:
    """The highest sequence number ever handed out (files or the counter)."""
    try:
        counter = int(_seq_counter_path(session).read_text().strip())
    except (OSError, ValueError):
        counter = 0
    return max([counter, *stored_seqs(session)])


def write_checkpoint(session: Session, checkpoint: Checkpoint) -> None:
    """Persist ``checkpoint`` (one atomic file), its prd and task states by blob id.

    The blobs are durable before the file is written, so a crash never leaves a file
    naming a missing one. A checkpoint read from a session sharing this one's store (a
    fork's copy, a graft) is written as it was read, without touching the store.
    """
    data = checkpoint.to_dict()
    stored = checkpoint._stored
    if stored is None and not worth_storing(checkpoint.state):
        # Nothing to refer to (a chat: no prd, no tasks): inline, and no store is looked up.
        atomic_write_json(checkpoint_path(session, checkpoint.seq), data)
        return
    store = session_store(session)
    if stored is not None and checkpoint.state is stored.on_disk:
        # Read unresolved (``resolve=False``): the state is still its blob ids.
        if stored.root == store.root:
            stored = replace(stored, state=checkpoint.state)
        else:
            data["state"] = resolve_state(stored.on_disk, stored.keys, BlobStore(stored.root))
            stored = None
    if stored is None or stored.state is not checkpoint.state or stored.root != store.root:
        stored = store_state(session, data["state"], store)
    checkpoint._stored = stored
    if stored.keys:
        data["state"] = stored.on_disk
        data[BLOBS_KEY] = list(stored.keys)
    atomic_write_json(checkpoint_path(session, checkpoint.seq), data)


def read_checkpoint(session: Session, path: Path, store: BlobStore | None = None) -> Checkpoint:
    """The checkpoint file ``path`` of ``session`` (its own, or one in an undo archive);
    raises ``FileNotFoundError``, ``SessionCorrupt`` or ``ValueError``."""
    data = read_json(path, what="checkpoint")
    if isinstance(data, dict) and BLOBS_KEY in data and store is None:
        store = session_store(session)
    return Checkpoint.from_dict(data, store)


@dataclass
class TimelineRead:
    """The checkpoints that could be read, oldest first, and the files that could not."""

    checkpoints: list[Checkpoint]
    problems: list[str]


def read_timeline(session: Session, *, resolve: bool = True) -> TimelineRead:
    """Every checkpoint of ``session``; a corrupt file is reported and skipped.

    ``resolve=False``: states stay as their files hold them (see ``Checkpoint.from_dict``)."""
    found: list[Checkpoint] = []
    problems: list[str] = []
    folder = checkpoints_dir(session)  # once: a long session has thousands of files
    store: BlobStore | None = None
    for seq in stored_seqs(session):
        path = _checkpoint_file(folder, seq)
        try:
            data = read_json(path, what="checkpoint")
            if store is None and isinstance(data, dict) and BLOBS_KEY in data:
                store = session_store(session)  # once, and only when a file needs it
            found.append(Checkpoint.from_dict(data, store, resolve=resolve))
        except FileNotFoundError:
            continue
        except (SessionCorrupt, ValueError, TypeError) as exc:
            problems.append(f"{path.name}: unreadable ({exc}); skipped")
    return TimelineRead(found, problems)


def list_checkpoints(session: Session) -> list[Checkpoint]:
    """The session's checkpoints, oldest first (corrupt files skipped)."""
    return read_timeline(session).checkpoints


def remember_highest(session: Session) -> None:
    """Note the highest id handed out, before checkpoints are deleted: ids are never reused."""
    atomic_write_text(_seq_counter_path(session), f"{highest_seq(session)}\n")


def forget_highest(session: Session) -> None:
    """Drop the counter of ids handed out (a reset to the seed: the numbering goes on from
    the checkpoints that remain, as if the erased run never happened)."""
    _seq_counter_path(session).unlink(missing_ok=True)


def delete_after(session: Session, seq: int) -> int:
    """Delete every checkpoint file with a sequence number above ``seq``; returns how many."""
    seqs = stored_seqs(session)
    if seqs and seqs[-1] > seq:
        # Remember the highest id before it disappears: ids are never handed out twice.
        high = highest_seq(session)
        atomic_write_text(_seq_counter_path(session), f"{high}\n")
    removed = 0
    for later in seqs:
        if later > seq:
            checkpoint_path(session, later).unlink(missing_ok=True)
            removed += 1
    return removed


def resolve_checkpoint(session: Session, ref: str) -> Checkpoint:
    """Find a checkpoint by id, number, ``seed``, ``latest``, ``T-001`` or ``T-001/planning``.

    ``T-001`` is the task's first start; ``T-001/<stage>`` the latest completion of
    that stage. Raises ``UsageError`` naming what exists when nothing matches.
    """
    ref = ref.strip()
    # Unresolved: a ref is matched by kind, task and stage, and only the match's state is
    # read. A checkpoint whose state blob is lost is then named as such, never stepped over
    # (``latest`` would otherwise land on the one before it).
    timeline = read_timeline(session, resolve=False)
    checkpoints = timeline.checkpoints
    if not checkpoints:
        raise UsageError(
            f"session {session.id} has no checkpoints yet",
            hint="checkpoints are recorded by `tilth prep-feature` and `tilth run`",
        )
    match: Checkpoint | None = None
    if ref == "latest":
        # The newest place on the timeline itself; ``before-`` states are reached by undo.
        match = next((c for c in reversed(checkpoints) if not c.is_before), checkpoints[-1])
    elif ref == "seed":
        match = next((c for c in checkpoints if c.kind == "seed"), None)
    elif ref.isdigit():
        match = next((c for c in checkpoints if c.seq == int(ref)), None)
    elif re.match(r"^cp-\d+$", ref):
        match = next((c for c in checkpoints if c.seq == int(ref[3:])), None)
    elif _TASK_RE.match(ref):
        match = next((c for c in checkpoints if c.kind == "task_start" and c.task_id == ref), None)
    elif "/" in ref and _TASK_RE.match(ref.split("/", 1)[0]):
        task, stage = ref.split("/", 1)
        stages = [
            c for c in checkpoints if c.kind == "stage" and (c.task_id, c.stage) == (task, stage)
        ]
        match = stages[-1] if stages else None
    if match is None:
        unreadable = f" ({len(timeline.problems)} checkpoint file(s) unreadable)"
        raise UsageError(
            f"no checkpoint {_shown(ref)} in session {session.id}"
            + (unreadable if timeline.problems else ""),
            hint="`tilth checkpoints` lists them; refer to one by id (cp-0007), number, "
            "seed, latest, a task (T-001) or a stage (T-001/planning)",
        )
    if match._stored is None:
        return match  # its state was inline: read whole already
    try:
        return read_checkpoint(session, checkpoint_path(session, match.seq))
    except (FileNotFoundError, SessionCorrupt, ValueError, TypeError) as exc:
        raise SessionCorrupt(
            f"checkpoint {match.id} ({match.kind}) cannot be restored: {exc}",
            hint="every other checkpoint still can (`tilth checkpoints` lists them)",
        ) from None


def _shown(ref: str, limit: int = 60) -> str:
    """``ref`` quoted for a message, cut when long (a pasted file is not echoed whole)."""
    if len(ref) <= limit:
        return repr(ref)
    return f"{ref[:limit]!r}… ({len(ref):,} chars)"
