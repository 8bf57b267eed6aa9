"""Forking: a new session whose code, conversation and harness state equal one checkpoint.

The new session gets its own id, branch (``session/<new>``, created at the checkpoint's
head) and worktree (the overlay applied on top). Its files are copies of the parent's,
cut to the checkpoint: the event log to ``event_offset``, threads to their heads (through
summaries), ledgers to their counts, prd/tasks/tokens/status from the recorded state, and
the checkpoints up to and including the target. ``checkpoint.json`` names
``parent_session`` and ``forked_from``. The parent is only read, apart from one line in
its operations log; it is locked meanwhile so nothing moves under the copy. A chat
(no git, manifest heads) forks into a directory of its own instead of a branch and
worktree (``rewind.snapshot_fork``), through the same plan and steps (``rewind.fork_steps``).

A fork is planned like every go-back and carried out by the one executor, journaled in
the parent: a fork interrupted half-way leaves the child marked ``fork_incomplete``
(status ``failed``) until the next command on the parent or on the child completes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tilth import git
from tilth.errors import UsageError
from tilth.session.harness_state import HarnessState
from tilth.session.store import Session, new_session_id
from tilth.timeline.record.blob_store import session_store
from tilth.timeline.record.checkpoints import Checkpoint, list_checkpoints, resolve_checkpoint
from tilth.timeline.record.dir_state import is_manifest_head, resolve_state
from tilth.timeline.record.state_capture import worktree_of
from tilth.timeline.rewind import planner, targets
from tilth.timeline.rewind.fork_steps import ForkError, fork_of
from tilth.timeline.rewind.plan import RewindPlan
from tilth.timeline.rewind.snapshot_fork import CHAT

__all__ = ["ForkError", "ForkResult", "fork_result", "plan_fork", "resolve_fork_target"]


@dataclass
class ForkResult:
    """The new session and where it came from."""

    session: Session
    parent: Session
    checkpoint: Checkpoint
    worktree: Path
    notes: list[str] = field(default_factory=list)
    """Warnings from making the new worktree ready (a submodule not checked out)."""


def plan_fork(parent: Session, target: Checkpoint, sessions_dir: Path) -> RewindPlan:
    """What forking ``parent`` at ``target`` makes (no writes): the executor carries it out in
    the parent's journal, so a crash half-way is completed by the next command on either."""
    if target.is_before:
        raise ForkError(
            f"{target.id} is an undo point; fork from a checkpoint of the timeline itself",
            hint=f"`tilth checkpoints {parent.id}` lists them",
        )
    copied = [c.seq for c in list_checkpoints(parent) if c.seq <= target.seq and not c.is_before]
    if is_manifest_head(target.head):
        # A chat: a directory of its own, written from snapshots (rewind.snapshot_fork).
        return plan_chat_fork(parent, target, sessions_dir, _new_child_id(sessions_dir), copied)
    info = parent.record()
    source = Path(info.source or "")
    if not info.source or not source.is_dir():
        raise ForkError(
            f"the source repository of session {parent.id} is missing ({source})",
            hint="a fork needs it to create the new branch and worktree",
        )
    worktree = worktree_of(parent)
    probe = worktree if worktree.is_dir() else source
    if git.rev_parse(target.head, probe) is None:
        raise ForkError(
            f"the commit {target.head[:12]} of {target.id} no longer exists",
            hint="pick a later checkpoint",
        )
    child = _new_child_id(sessions_dir)
    branch = f"session/{child}"
    workspace = sessions_dir / child / "workspace"
    statuses = HarnessState.from_dict(target.state).task_statuses()
    details = (
        f"new session {child}: branch {branch} at {target.head[:12]}, worktree {workspace}",
        f"files: {len(target.overlay)} uncommitted file(s) of the checkpoint written over it",
        f"conversation: {len(target.threads)} thread(s) cut to the checkpoint",
        "tasks: " + (", ".join(f"{t} {s}" for t, s in statuses.items()) or "none"),
        f"checkpoints copied: {len(copied)}",
        f"session {parent.id} itself is not changed",
    )
    return planner.plan(
        parent,
        targets.fork_target(
            target,
            f"fork session {parent.id} at {target.id} ({target.label}) into {child}",
            details,
            {
                "child": child,
                "sessions_dir": str(sessions_dir),
                "source": str(source),
                "branch": branch,
                "workspace": str(workspace),
                "checkpoint": target.to_dict(),
                "copy_seqs": copied,
            },
        ),
    )


def plan_chat_fork(
    parent: Session, target: Checkpoint, sessions_dir: Path, child: str, seqs: list[int]
) -> RewindPlan:
    """What forking the chat ``parent`` just before ``target``'s turn makes (no writes)."""
    workspace = sessions_dir / child / "workspace"
    files = resolve_state(session_store(parent), target.head, dict(target.overlay))
    kept = [s for s in seqs if s < target.seq]
    details = (
        f"new chat session {child} in a directory of its own: {workspace} (no branch)",
        f"files: {len(files)} file(s) written from snapshots, as they were just before the turn",
        f"conversation: {len(target.threads)} thread(s) cut to just before the turn",
        f"checkpoints copied: {len(kept)} (the turns before this one)",
        f"session {parent.id} itself is not changed, nor its directory",
    )
    return planner.plan(
        parent,
        targets.fork_target(
            target,
            f"fork chat session {parent.id} at {target.id} ({target.label}) into {child}",
            details,
            {
                "kind": CHAT,
                "child": child,
                "sessions_dir": str(sessions_dir),
                "source": str(workspace),
                "branch": None,
                "workspace": str(workspace),
                "checkpoint": target.to_dict(),
                "copy_seqs": seqs,
            },
        ),
    )


def _new_child_id(sessions_dir: Path) -> str:
    while True:
        candidate = new_session_id()
        if not (sessions_dir / candidate).exists():
            return candidate


def fork_result(parent: Session, plan: RewindPlan) -> ForkResult:
    """What a carried-out fork plan made."""
    assert plan.fork is not None
    child, target = fork_of(plan.fork)
    return ForkResult(child, parent, target, Path(str(plan.fork["workspace"])).resolve())


def resolve_fork_target(parent: Session, ref: str | None) -> Checkpoint:
    """The checkpoint named by ``--at`` (required: a fork point is a deliberate choice)."""
    if not ref:
        raise UsageError(
            "say where to fork from with --at <checkpoint>",
            hint=f"`tilth checkpoints {parent.id}` lists them",
        )
    return resolve_checkpoint(parent, ref)
