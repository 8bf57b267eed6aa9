"""The steps that take the conversation, the harness state, the log and the timeline back.

Restore the state (and the ledgers), cut the threads, add the "files were restored" note,
delete a reset's derived files, cut the event log, drop the later checkpoints. An undo's
steps bring each back from its archive instead (``archive``; ``rewind.undo_archive``).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilth.session.store import Session
from tilth.session.threads import Thread
from tilth.timeline.record.checkpoints import (
    checkpoint_path,
    delete_after,
    forget_highest,
    remember_highest,
)
from tilth.timeline.record.state_capture import log_tail
from tilth.timeline.rewind import undo_archive as archived
from tilth.timeline.rewind.code_state import note_code_state
from tilth.timeline.rewind.journal import keep_operations
from tilth.timeline.rewind.state_restore import (
    cut_events,
    cut_lines,
    remove_path,
    restore_counts,
    restore_files,
    restore_threads,
)
from tilth.timeline.rewind.step_base import PlanView, Step, listing


@dataclass(frozen=True)
class RestoreState(Step):
    """The harness state (prd, tasks, status, tokens) and the ledgers back as recorded."""

    state: dict[str, Any]
    """See ``record.state_capture.capture_state``."""
    task_changes: tuple[tuple[str, str, str], ...] = ()
    """``(task, now, then)`` for a person to read."""
    archive: str | None = None
    """Undo: the ledgers come back whole from this archive."""
    NAMES = ("state", "ledger")

    def apply(self, session: Session, plan: PlanView, name: str) -> None:
        if name == "state":
            restore_files(session, self.state)
        elif self.archive is not None:
            archived.restore_archived_ledger(session, self.archive)
        else:
            restore_counts(session.ledger.directory, dict(self.state.get("ledger") or {}))
            lines = self.state.get("progress_lines")
            if isinstance(lines, int):
                cut_lines(session.progress_path, lines)

    def record_undo(self, session: Session, archive: Path, meta: dict[str, Any]) -> None:
        archived.copy_dir(session.ledger.directory, archive / "ledger", "*.jsonl")
        if session.progress_path.is_file():
            shutil.copy2(session.progress_path, archive / "progress.txt")
        meta["ledger"] = True

    def describe(self, plan: PlanView) -> list[str]:
        if self.state.get("prd") is None:
            return []  # a chat has no tasks: no line about them
        changes = [f"{t}: {old} -> {new}" for t, old, new in self.task_changes]
        return listing("tasks", changes, "unchanged")

    def flat(self) -> dict[str, Any]:
        return {"state": self.state, "task_changes": list(self.task_changes)}


def _archive_threads(session: Session, archive: Path, meta: dict[str, Any]) -> None:
    if not meta.get("threads"):
        archived.copy_dir(session.threads.directory, archive / "threads", "*.jsonl")
        meta["threads"] = True


@dataclass(frozen=True)
class CutThreads(Step):
    """Threads truncated to their heads (unlisted threads deleted)."""

    heads: dict[str, str | None]
    messages_dropped: dict[str, int] = field(default_factory=dict)
    threads_deleted: tuple[str, ...] = ()
    archive: str | None = None
    """Undo: the threads come back from this archive first."""
    NAMES = ("threads",)

    def apply(self, session: Session, plan: PlanView, name: str) -> None:
        if self.archive is not None:
            archived.restore_archived_threads(session, self.archive)
        restore_threads(session.threads.directory, self.heads)

    def record_undo(self, session: Session, archive: Path, meta: dict[str, Any]) -> None:
        _archive_threads(session, archive, meta)

    def describe(self, plan: PlanView) -> list[str]:
        dropped = [f"{k}: {n} message(s)" for k, n in sorted(self.messages_dropped.items()) if n]
        dropped += [f"{k}: whole thread deleted" for k in self.threads_deleted]
        # An undo brings the conversation back from its archive (said below), not "nothing".
        if dropped or self.archive is None:
            return listing("conversation dropped", dropped, "nothing")
        return []

    def flat(self) -> dict[str, Any]:
        return {
            "threads": self.heads,
            "messages_dropped": self.messages_dropped,
            "threads_deleted": list(self.threads_deleted),
        }


@dataclass(frozen=True)
class AddNote(Step):
    """A message appended to a thread after a code-only restore (once per operation)."""

    thread: str
    text: str
    NAMES = ("note",)

    def apply(self, session: Session, plan: PlanView, name: str) -> None:
        thread = Thread(session.threads.directory, self.thread)
        stored = thread.read()
        if stored and stored[-1].meta.get("op") == plan.op_id:
            return
        thread.append({"role": "user", "content": self.text}, kind="rewind_note", op=plan.op_id)

    def record_undo(self, session: Session, archive: Path, meta: dict[str, Any]) -> None:
        _archive_threads(session, archive, meta)

    def describe(self, plan: PlanView) -> list[str]:
        return [f"conversation: a note is added to thread {self.thread}"]

    def flat(self) -> dict[str, Any]:
        return {"note": {"thread": self.thread, "text": self.text}}


@dataclass(frozen=True)
class DeletePaths(Step):
    """Session-relative files or directories deleted (a reset's derived files)."""

    paths: tuple[str, ...]
    NAMES = ("paths",)

    def apply(self, session: Session, plan: PlanView, name: str) -> None:
        for rel in self.paths:
            remove_path(session.dir / rel)
        if plan.op == "reset_to_seed":
            # The run's go-backs are erased with it; the record of resets stays.
            keep_operations(session, "reset_to_seed")

    def describe(self, plan: PlanView) -> list[str]:
        return ["deleted: " + ", ".join(self.paths)]

    def flat(self) -> dict[str, Any]:
        return {"delete_paths": list(self.paths)}


@dataclass(frozen=True)
class CutEvents(Step):
    """``events.jsonl`` cut at a byte offset (an undo: then its archived tail put back)."""

    offset: int
    events_dropped: int = 0
    event_types: dict[str, int] = field(default_factory=dict)
    archive: str | None = None
    """Undo: the archive whose log tail is appended after the cut."""
    cut: int | None = None
    """Undo: where the log is cut before the tail goes back (default ``offset``)."""
    NAMES = ("events",)

    def apply(self, session: Session, plan: PlanView, name: str) -> None:
        if self.archive is not None:
            archived.splice_events(session, self.archive, self.cut or self.offset, plan.op_id)
            return
        cut_events(session, self.offset, plan.op_id)

    def record_undo(self, session: Session, archive: Path, meta: dict[str, Any]) -> None:
        cut = self.cut if self.cut is not None else self.offset
        size, _ = log_tail(session.events.path)
        if cut < size:
            archived.copy_tail(session.events.path, cut, archive / "events.tail")
            meta["event_cut"] = cut

    def describe(self, plan: PlanView) -> list[str]:
        kinds = ", ".join(f"{t} x{n}" for t, n in sorted(self.event_types.items()))
        return [f"events: {self.events_dropped} dropped" + (f" ({kinds})" if kinds else "")]

    def flat(self) -> dict[str, Any]:
        return {
            "event_offset": self.offset,
            "event_cut": self.cut,
            "events_dropped": self.events_dropped,
            "event_types": self.event_types,
        }


@dataclass(frozen=True)
class DropCheckpoints(Step):
    """The checkpoints after the target deleted (an undo: exactly its set kept)."""

    keep_through: int | None = None
    """Delete the checkpoints numbered higher; None with ``keep_seqs`` (an undo)."""
    drop_seqs: tuple[int, ...] = ()
    """Exactly what goes (kept in the undo archive); undo points stay."""
    keep_seqs: tuple[int, ...] | None = None
    """Undo: exactly the (non-``before-``) checkpoints to keep."""
    archive: str | None = None
    """Undo: where the dropped checkpoints it brings back are."""
    count: int = 0
    """How many go (for a person; journals older than ``drop_seqs`` only had this)."""
    NAMES = ("checkpoints",)

    def apply(self, session: Session, plan: PlanView, name: str) -> None:
        if not plan.changes_code:
            # Turn snapshots: the files stay as the newest checkpoint left them; note that
            # state before its checkpoint goes, or later rewinds would take them for edits.
            note_code_state(session)
        if self.keep_seqs is not None and self.archive is not None:
            remember_highest(session)
            archived.restore_archived_checkpoints(session, self.archive, list(self.keep_seqs))
        elif plan.before is None:
            # Reset to the seed (and journals written before undo existed): all after.
            assert self.keep_through is not None
            delete_after(session, self.keep_through)
            if plan.op == "reset_to_seed":
                forget_highest(session)
        else:
            # Exactly the checkpoints the plan named; undo points (``before-``) stay.
            remember_highest(session)
            for seq in self.drop_seqs:
                checkpoint_path(session, seq).unlink(missing_ok=True)
        archived.prune_archives(session)

    def record_undo(self, session: Session, archive: Path, meta: dict[str, Any]) -> None:
        for seq in self.drop_seqs:
            source = checkpoint_path(session, seq)
            if source.is_file():
                shutil.copy2(source, archive / "checkpoints" / source.name)

    def describe(self, plan: PlanView) -> list[str]:
        lines = []
        if self.keep_through is not None:
            lines.append(f"checkpoints: {self.count} later checkpoint(s) deleted")
        if self.archive is not None:
            lines.append(
                "restored from the undo archive: the event log, conversation, ledgers and "
                "checkpoints as they were"
            )
        return lines

    def flat(self) -> dict[str, Any]:
        return {
            "keep_through_seq": self.keep_through,
            "drop_seqs": list(self.drop_seqs),
            "keep_seqs": None if self.keep_seqs is None else list(self.keep_seqs),
            "checkpoints_dropped": self.count,
        }
