"""Undo: every go-back but reset-to-seed first records where it left from.

Before a go-back changes anything, the executor's ``before`` step records the current
state as a checkpoint of kind ``before-<verb>``: the code (HEAD plus every uncommitted
file, stored in the blob store), the conversation heads and the harness state, like any
checkpoint. What the go-back is about to destroy goes into an archive next to it,
``timeline/undo/cp-NNNN/``: the event log's tail after the cut, the threads, ledgers and
``progress.txt`` as they are, and the checkpoint files it deletes. ``tilth rewind --undo``
goes back to that checkpoint with everything from the archive, and records a
``before-undo`` checkpoint of its own first, so undoing an undo is redo.

This module is the verb: the undo's target and what its archive holds. Recording the
undo point and the restores from an archive are steps (``rewind.undo_archive``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilth.errors import UsageError
from tilth.session.files import read_json
from tilth.session.store import Session
from tilth.timeline.record.checkpoints import (
    Checkpoint,
    list_checkpoints,
    read_timeline,
    resolve_checkpoint,
)
from tilth.timeline.record.state_capture import log_tail
from tilth.timeline.rewind.snapshot_restore import is_snapshot_session
from tilth.timeline.rewind.targets import CodeGoal, Extras, HistoryGoal, Target


# ---- going back to a before- checkpoint --------------------------------------------------
def read_archive(session: Session, checkpoint: Checkpoint) -> dict[str, Any]:
    """The archive's description; a missing one is a usage error naming the checkpoint."""
    if checkpoint.archive is None:
        raise UsageError(f"{checkpoint.id} is not an undo point ({checkpoint.kind})")
    try:
        data = read_json(session.dir / checkpoint.archive / "archive.json", what="undo archive")
    except FileNotFoundError:
        raise UsageError(
            f"the undo archive of {checkpoint.id} is missing",
            hint=f"`tilth rewind --to {checkpoint.id}` still restores its code and state",
        ) from None
    return data if isinstance(data, dict) else {}


def undo_points(session: Session) -> list[Checkpoint]:
    """The ``before-`` checkpoints, oldest first (their states not read: see
    ``resolve_checkpoint``, which reads the one gone back to)."""
    return [c for c in read_timeline(session, resolve=False).checkpoints if c.is_before]


def undo_target(session: Session, ref: str | None) -> Target:
    """Go back to the state before a go-back: the newest one, or ``ref``."""
    points = undo_points(session)
    if ref is None:
        if not points:
            raise UsageError(
                f"session {session.id} has nothing to undo",
                hint="each rewind of the chat records an undo point"
                if is_snapshot_session(session)
                else "rewind, restart and resume record an undo point; reset --to-seed does not",
            )
        # Named, not taken from the list: one whose state is lost is an error, not skipped.
        point = resolve_checkpoint(session, points[-1].id)
    else:
        point = resolve_checkpoint(session, ref)
        if not point.is_before:
            raise UsageError(
                f"{point.id} is a {point.kind} checkpoint, not an undo point",
                hint="undo points are the before-<verb> rows of `tilth checkpoints`; "
                f"`tilth rewind --to {point.id}` goes to any checkpoint",
            )
    meta = read_archive(session, point)
    cut = meta.get("event_cut")
    offset = int(cut) if isinstance(cut, int) else point.event_offset
    size, _ = log_tail(session.events.path)
    if offset > size:
        raise UsageError(
            f"a later go-back cut the event log below {point.id}; undo that one first",
            hint="undo the newest undo points first (`tilth rewind --undo`)",
        )
    # The log is cut where the go-back cut it (below the undo point), so the events the
    # undo drops are counted from the last one kept there, not from the undo point's.
    _, kept_seq = log_tail(session.events.path, offset)
    return Target(
        op="undo",
        ref=point.id,
        label=point.label,
        scope="both",
        headline=f"undo: return session {{session}} to {point.id} ({point.label})",
        code=CodeGoal(point.head, dict(point.overlay)),
        history=HistoryGoal(
            state=dict(point.state),
            threads=dict(point.threads),
            event_offset=offset,
            event_seq=kept_seq,
        ),
        extras=Extras(archive=point.archive),
        checkpoint=point,
        event={"type": "undo", "payload": {"to": point.id}},
    )


@dataclass
class ArchivePart:
    """What only an undo has: its archive, the exact checkpoint set, the log splice."""

    archive: str
    keep_seqs: list[int]
    drop_seqs: list[int]
    event_cut: int | None
    recorded: dict[str, Any] | None = None
    details: list[str] = field(default_factory=list)


def archive_part(session: Session, target: Target) -> ArchivePart:
    """Read the undo point's archive: what the undo keeps, drops and restores."""
    archive = target.extras.archive
    assert archive is not None and target.checkpoint is not None
    meta = read_archive(session, target.checkpoint)
    keep = [int(s) for s in meta.get("checkpoint_set") or []]
    present = [c for c in list_checkpoints(session) if not c.is_before]
    part = ArchivePart(
        archive=archive,
        keep_seqs=keep,
        drop_seqs=[c.seq for c in present if c.seq not in keep],
        event_cut=target.history.event_offset,
    )
    recorded = meta.get("recorded")
    if isinstance(recorded, dict) and recorded.get("head"):
        part.recorded = {"head": str(recorded["head"]), "overlay": recorded.get("overlay") or {}}
    restored = sorted(set(keep) - {c.seq for c in present})
    if restored:
        part.details.append(f"checkpoints restored: {len(restored)}")
    tail = session.dir / archive / "events.tail"
    if tail.is_file():
        part.details.append(f"events restored: {_count_lines(tail)}")
    return part


def _count_lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
