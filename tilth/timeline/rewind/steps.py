"""The steps a go-back is made of: small frozen values that apply, archive and describe
themselves.

A ``RewindPlan`` (``rewind.plan``) is a header plus a tuple of these. Each step carries
what it writes (absolute values: a sha, an offset, thread heads), so the executor can
repeat an interrupted one; ``apply`` carries it out for one of its journal names (most
steps have one; restoring the state also restores the ledger, a fork and a graft have
four each); ``record_undo`` copies into the undo archive what it is about to destroy;
``describe`` is its part of the plan a person reads; ``flat`` its keys in the journal's
copy of the plan (the one flat record older Tilths wrote, read back by ``plan.from_dict``).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from tilth import git
from tilth.session.store import Session
from tilth.session.threads import Thread
from tilth.timeline.record.blob_store import session_store
from tilth.timeline.record.checkpoints import (
    checkpoint_path,
    delete_after,
    forget_highest,
    remember_highest,
)
from tilth.timeline.record.dir_state import is_manifest_head
from tilth.timeline.record.state_capture import last_event, log_tail
from tilth.timeline.rewind import fork_steps
from tilth.timeline.rewind import graft as grafting
from tilth.timeline.rewind import undo_archive as archived
from tilth.timeline.rewind.code_restore import Overlay, apply_files
from tilth.timeline.rewind.code_state import note_code_state, note_restored, restore_overlay
from tilth.timeline.rewind.journal import keep_operations
from tilth.timeline.rewind.snapshot_restore import apply_snapshot_files
from tilth.timeline.rewind.state_restore import (
    cut_events,
    cut_lines,
    remove_path,
    restore_counts,
    restore_files,
    restore_threads,
)

if TYPE_CHECKING:
    from tilth.timeline.rewind.plan import RewindPlan

STEP_ORDER = (
    "before",
    "stash",
    "code",
    "unwind",
    "state",
    "ledger",
    "threads",
    "note",  # after the threads: a code rewind that drops threads keeps its note
    "paths",
    "events",
    "checkpoints",
    *fork_steps.FORK_STEPS,
    "log",
    *grafting.GRAFT_STEPS,
    "finish",
)
"""Every journal step name, in execution order (``finish`` is the executor's own)."""


class Step:
    """What every step can do; the frozen dataclasses below hold what it writes."""

    NAMES: ClassVar[tuple[str, ...]] = ()
    """The journal's names for this step (also the ``TILTH_FAULT_AT`` values)."""

    def apply(self, session: Session, plan: RewindPlan, name: str) -> None:
        """Carry out the part ``name`` of this step (idempotent: absolute values only)."""
        raise NotImplementedError

    def record_undo(self, session: Session, archive: Path, meta: dict[str, Any]) -> None:
        """Copy into the undo ``archive`` what this step destroys (most destroy nothing
        an undo needs back beyond the undo point itself)."""

    def describe(self, plan: RewindPlan) -> list[str]:
        """This step's lines of the dry run and the confirmation."""
        return []

    def flat(self) -> dict[str, Any]:
        """This step's keys in the journal's flat copy of the plan."""
        raise NotImplementedError


def listing(title: str, items: list[str], empty: str, limit: int = 20) -> list[str]:
    """A titled list of at most ``limit`` items (``empty`` when there are none)."""
    if not items:
        return [f"{title}: {empty}"] if empty else []
    out = [f"{title} ({len(items)}):"]
    out += [f"    {item}" for item in items[:limit]]
    if len(items) > limit:
        out.append(f"    ... and {len(items) - limit} more")
    return out


@dataclass(frozen=True)
class RecordUndo(Step):
    """The undo point: a ``before-<op>`` checkpoint plus the archive of what goes."""

    kind: str
    """``before-rewind``, ``before-restart``..."""
    seq: int
    """Its sequence number (fixed at plan time, so a retry reuses it)."""
    NAMES = ("before",)

    def apply(self, session: Session, plan: RewindPlan, name: str) -> None:
        archived.record_before(session, plan)

    def undo_line(self, undo_with: str) -> str:
        """The last line of a plan: how the person reading it undoes it."""
        return (
            f"undo: the current state is kept as checkpoint cp-{self.seq:04d} "
            f"({self.kind}); {undo_with} returns to it"
        )

    def flat(self) -> dict[str, Any]:
        return {"before": self.kind, "before_seq": self.seq}


@dataclass(frozen=True)
class Stash(Step):
    """Uncommitted changes saved on the session's stash ref before the code moves."""

    message: str
    NAMES = ("stash",)

    def apply(self, session: Session, plan: RewindPlan, name: str) -> None:
        # Idempotent: once stashed, the worktree is clean and there is nothing left to stash.
        git.stash(Path(plan.worktree), self.message, ref=git.stash_ref(session.id))

    def flat(self) -> dict[str, Any]:
        return {"stash_message": self.message}


@dataclass(frozen=True)
class RestoreCode(Step):
    """The worktree back to ``head`` + ``overlay``: only the listed files are written."""

    head: str | None
    """The commit (or ``manifest:`` snapshot) the code goes back to; None for a chat whose
    files come from snapshots only (``snapshot``)."""
    overlay: Overlay = field(default_factory=dict)
    keep: Overlay = field(default_factory=dict)
    """Files the user edited since the latest recorded state, written back after."""
    force: bool = False
    snapshot: bool = False
    """No git (a chat): files from snapshots only, no reset, no commits."""
    files: tuple[tuple[str, str], ...] = ()
    """``(restore | delete, path)``."""
    commits_dropped: tuple[tuple[str, str], ...] = ()
    commits_restored: tuple[tuple[str, str], ...] = ()
    conflicts: tuple[str, ...] = ()
    """Uncommitted changes no checkpoint holds (or, with turn snapshots, edited files)."""
    recorded: dict[str, Any] | None = None
    """Undo: ``{head, overlay}`` the agent had written when the undo point was taken."""
    NAMES = ("code",)

    def apply(self, session: Session, plan: RewindPlan, name: str) -> None:
        worktree = Path(plan.worktree)
        if self.snapshot or is_manifest_head(self.head):
            # No git (a chat): write exactly the planned files (the overlay holds the writes).
            apply_snapshot_files(session, worktree, self.overlay)
            return
        assert self.head is not None
        if plan.op == "reset_to_seed":
            # SPEC §7: the first seed's reset, exactly: `git reset --hard` + `git clean -fd`.
            git.reset_hard(worktree, self.head)
            git.clean_fd(worktree)
            # What restarts stashed goes too: no tip of the erased run is kept (the first seed).
            git.delete_ref(worktree, git.stash_ref(session.id))
            restore_overlay(session, worktree, self.overlay, keep=self.keep)
            return
        # Only the files the plan lists (and those moving HEAD changes) are written; the
        # user's kept edits are never touched. The restored state is noted either way.
        store = session_store(session)
        apply_files(worktree, self.head, list(self.files), self.overlay, self.keep, store)
        # An undo also notes the agent's state behind the tree it wrote (the user's files in
        # that tree stay the user's for the go-backs that follow).
        note_restored(session, worktree, self.overlay, agent=self.recorded)

    def describe(self, plan: RewindPlan) -> list[str]:
        files = listing("  files", [f"{a:7} {p}" for a, p in self.files], "unchanged")
        if self.head is not None and self.head.startswith("manifest:"):
            return ["code: files written back from snapshots (no git)", *files]
        if self.head is None:
            return ["code: files restored from snapshots (no git)", *files]
        how = (
            "git reset --hard + clean -fd"
            if plan.op == "reset_to_seed"
            else "only the files listed are written; HEAD moves with git reset --soft"
        )
        lines = [f"code: reset the worktree to {self.head[:12]} ({how})", *files]
        lines += listing(
            "  commits dropped", [f"{s[:10]} {m}" for s, m in self.commits_dropped], "none"
        )
        if self.commits_restored:
            lines += listing(
                "  commits restored", [f"{s[:10]} {m}" for s, m in self.commits_restored], ""
            )
        return lines

    def conflict_lines(self, stashed: bool) -> list[str]:
        """The user's uncommitted changes and what happens to them (after the rest)."""
        if not self.conflicts:
            return []
        snapshots = self.snapshot or (self.head or "").startswith("manifest:")
        if self.keep or self.force or snapshots:
            # Turn snapshots: conflicts are files edited since the latest recorded state.
            verb = (
                "OVERWRITTEN (--force)"
                if self.force
                else "kept as they are (edited since the last checkpoint; --force overwrites)"
            )
            return listing(f"files you changed, {verb}", list(self.conflicts), "")
        verb = "stashed" if stashed else "LOST (not on any checkpoint)"
        return listing(f"uncommitted changes, {verb}", list(self.conflicts), "")

    def flat(self) -> dict[str, Any]:
        return {
            "head": self.head,
            "overlay": self.overlay,
            "keep": self.keep,
            "force": self.force,
            "snapshot_code": self.snapshot,
            "files": list(self.files),
            "commits_dropped": list(self.commits_dropped),
            "commits_restored": list(self.commits_restored),
            "conflicts": list(self.conflicts),
            "recorded": self.recorded,
        }


@dataclass(frozen=True)
class Unwind(Step):
    """Resume's preparation: ``git reset --soft`` off the FAILED placeholder commit."""

    commit: str
    NAMES = ("unwind",)

    def apply(self, session: Session, plan: RewindPlan, name: str) -> None:
        git.reset_soft(Path(plan.worktree), self.commit)

    def describe(self, plan: RewindPlan) -> list[str]:
        return [
            f"code: unwind the FAILED placeholder commit (git reset --soft {self.commit[:12]});"
            " its changes stay in the worktree"
        ]

    def flat(self) -> dict[str, Any]:
        return {"unwind": self.commit}


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

    def apply(self, session: Session, plan: RewindPlan, name: str) -> None:
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

    def describe(self, plan: RewindPlan) -> list[str]:
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

    def apply(self, session: Session, plan: RewindPlan, name: str) -> None:
        if self.archive is not None:
            archived.restore_archived_threads(session, self.archive)
        restore_threads(session.threads.directory, self.heads)

    def record_undo(self, session: Session, archive: Path, meta: dict[str, Any]) -> None:
        _archive_threads(session, archive, meta)

    def describe(self, plan: RewindPlan) -> list[str]:
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

    def apply(self, session: Session, plan: RewindPlan, name: str) -> None:
        thread = Thread(session.threads.directory, self.thread)
        stored = thread.read()
        if stored and stored[-1].meta.get("op") == plan.op_id:
            return
        thread.append({"role": "user", "content": self.text}, kind="rewind_note", op=plan.op_id)

    def record_undo(self, session: Session, archive: Path, meta: dict[str, Any]) -> None:
        _archive_threads(session, archive, meta)

    def describe(self, plan: RewindPlan) -> list[str]:
        return [f"conversation: a note is added to thread {self.thread}"]

    def flat(self) -> dict[str, Any]:
        return {"note": {"thread": self.thread, "text": self.text}}


@dataclass(frozen=True)
class DeletePaths(Step):
    """Session-relative files or directories deleted (a reset's derived files)."""

    paths: tuple[str, ...]
    NAMES = ("paths",)

    def apply(self, session: Session, plan: RewindPlan, name: str) -> None:
        for rel in self.paths:
            remove_path(session.dir / rel)
        if plan.op == "reset_to_seed":
            # The run's go-backs are erased with it; the record of resets stays.
            keep_operations(session, "reset_to_seed")

    def describe(self, plan: RewindPlan) -> list[str]:
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

    def apply(self, session: Session, plan: RewindPlan, name: str) -> None:
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

    def describe(self, plan: RewindPlan) -> list[str]:
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

    def apply(self, session: Session, plan: RewindPlan, name: str) -> None:
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

    def describe(self, plan: RewindPlan) -> list[str]:
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


@dataclass(frozen=True)
class MakeChild(Step):
    """A fork: the new session made at the checkpoint (this one only read)."""

    spec: dict[str, Any]
    """``{child, sessions_dir, source, branch, workspace, checkpoint, copy_seqs}``;
    ``kind: "chat"`` for a chat's fork (a directory of its own, no branch)."""
    NAMES = fork_steps.FORK_STEPS

    def apply(self, session: Session, plan: RewindPlan, name: str) -> None:
        fork_steps.STEPS[name](session, self.spec, plan.op_id)

    def flat(self) -> dict[str, Any]:
        return {"fork": self.spec}


@dataclass(frozen=True)
class LogEvent(Step):
    """The operation's own event, appended after the cut (once)."""

    type: str
    payload: dict[str, Any] = field(default_factory=dict)
    NAMES = ("log",)

    def apply(self, session: Session, plan: RewindPlan, name: str) -> None:
        last = last_event(session.events.path)
        if last and last.get("type") == self.type:
            payload = last.get("payload")
            if isinstance(payload, dict) and payload.get("op") == plan.op_id:
                return
        payload = {**self.payload, "op": plan.op_id, "dropped": plan.summary()}
        session.events.append(self.type, payload)

    def flat(self) -> dict[str, Any]:
        return {"event": {"type": self.type, "payload": self.payload}}


@dataclass(frozen=True)
class Graft(Step):
    """A fork's work on one task brought into this session after the rest of the plan
    (``rewind.graft.graft_spec``: a best-of-N winner, ``tilth attempts --pick``)."""

    spec: dict[str, Any]
    NAMES = grafting.GRAFT_STEPS

    def apply(self, session: Session, plan: RewindPlan, name: str) -> None:
        grafting.STEPS[name](session, self.spec, plan.op_id)

    def flat(self) -> dict[str, Any]:
        return {"graft": self.spec}


STEP_TYPES: tuple[type[Step], ...] = (
    RecordUndo,
    Stash,
    RestoreCode,
    Unwind,
    RestoreState,
    CutThreads,
    AddNote,
    DeletePaths,
    CutEvents,
    DropCheckpoints,
    MakeChild,
    LogEvent,
    Graft,
)
"""Every kind of step, in the order a plan holds them."""
