"""The steps a go-back is made of: small frozen values that apply, archive and describe
themselves (``rewind.step_base.Step``).

A ``PlanView`` (``rewind.plan``) is a header plus a tuple of these. Here: the undo point,
the stash, the code, resume's unwind, a fork's new session, the operation's event and a
graft; the conversation, state, log and timeline steps are in ``rewind.history_steps``.
``STEP_TYPES`` lists them all, in the order a plan holds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilth import git
from tilth.session.store import Session
from tilth.timeline.record.blob_store import session_store
from tilth.timeline.record.dir_state import is_manifest_head
from tilth.timeline.record.state_capture import last_event
from tilth.timeline.rewind import fork_steps
from tilth.timeline.rewind import graft as grafting
from tilth.timeline.rewind import undo_archive as archived
from tilth.timeline.rewind.code_restore import Overlay, apply_files
from tilth.timeline.rewind.code_state import note_restored, restore_overlay
from tilth.timeline.rewind.history_steps import (
    AddNote,
    CutEvents,
    CutThreads,
    DeletePaths,
    DropCheckpoints,
    RestoreState,
)
from tilth.timeline.rewind.snapshot_restore import apply_snapshot_files
from tilth.timeline.rewind.step_base import STEP_ORDER, PlanView, Step, listing

__all__ = [
    "STEP_ORDER",
    "STEP_TYPES",
    "AddNote",
    "CutEvents",
    "CutThreads",
    "DeletePaths",
    "DropCheckpoints",
    "Graft",
    "LogEvent",
    "MakeChild",
    "RecordUndo",
    "RestoreCode",
    "RestoreState",
    "Stash",
    "Step",
    "Unwind",
]


@dataclass(frozen=True)
class RecordUndo(Step):
    """The undo point: a ``before-<op>`` checkpoint plus the archive of what goes."""

    kind: str
    """``before-rewind``, ``before-restart``..."""
    seq: int
    """Its sequence number (fixed at plan time, so a retry reuses it)."""
    NAMES = ("before",)

    def apply(self, session: Session, plan: PlanView, name: str) -> None:
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

    def apply(self, session: Session, plan: PlanView, name: str) -> None:
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

    def apply(self, session: Session, plan: PlanView, name: str) -> None:
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

    def describe(self, plan: PlanView) -> list[str]:
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

    def apply(self, session: Session, plan: PlanView, name: str) -> None:
        git.reset_soft(Path(plan.worktree), self.commit)

    def describe(self, plan: PlanView) -> list[str]:
        return [
            f"code: unwind the FAILED placeholder commit (git reset --soft {self.commit[:12]});"
            " its changes stay in the worktree"
        ]

    def flat(self) -> dict[str, Any]:
        return {"unwind": self.commit}


@dataclass(frozen=True)
class MakeChild(Step):
    """A fork: the new session made at the checkpoint (this one only read)."""

    spec: dict[str, Any]
    """``{child, sessions_dir, source, branch, workspace, checkpoint, copy_seqs}``;
    ``kind: "chat"`` for a chat's fork (a directory of its own, no branch)."""
    NAMES = fork_steps.FORK_STEPS

    def apply(self, session: Session, plan: PlanView, name: str) -> None:
        fork_steps.STEPS[name](session, self.spec, plan.op_id)

    def flat(self) -> dict[str, Any]:
        return {"fork": self.spec}


@dataclass(frozen=True)
class LogEvent(Step):
    """The operation's own event, appended after the cut (once)."""

    type: str
    payload: dict[str, Any] = field(default_factory=dict)
    NAMES = ("log",)

    def apply(self, session: Session, plan: PlanView, name: str) -> None:
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

    def apply(self, session: Session, plan: PlanView, name: str) -> None:
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
