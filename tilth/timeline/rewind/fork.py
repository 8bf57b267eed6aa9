"""Forking: a new session whose code, conversation and harness state equal one checkpoint.

The new session gets its own id, branch (``session/<new>``, created at the checkpoint's
head) and worktree (the overlay applied on top). Its files are copies of the parent's,
cut to the checkpoint: the event log to ``event_offset``, threads to their heads (through
summaries), ledgers to their counts, prd/tasks/tokens/status from the recorded state, and
the checkpoints up to and including the target. ``checkpoint.json`` names
``parent_session`` and ``forked_from``. The parent is only read, apart from one line in
its operations log; it is locked meanwhile so nothing moves under the copy. A chat
(no git, manifest heads) forks into a directory of its own instead of a branch and
worktree (``rewind.snapshot_fork``), through the same plan and steps.

A fork is planned like every go-back and carried out by the one executor, journaled in
the parent: a fork interrupted half-way leaves the child marked ``fork_incomplete``
(status ``failed``) until the next command on the parent or on the child completes it.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilth import git, git_worktrees
from tilth.errors import TilthError, UsageError
from tilth.session.events import utc_now
from tilth.session.files import atomic_write_json
from tilth.session.harness_state import HarnessState
from tilth.session.store import CHECKPOINT_SCHEMA, Session, new_session_id
from tilth.timeline.record.blob_store import remember_store, session_store
from tilth.timeline.record.checkpoints import (
    Checkpoint,
    checkpoint_path,
    delete_after,
    list_checkpoints,
    resolve_checkpoint,
    timeline_dir,
    write_checkpoint,
)
from tilth.timeline.record.dir_state import is_manifest_head
from tilth.timeline.record.state_capture import last_event, worktree_of
from tilth.timeline.rewind import planner, targets
from tilth.timeline.rewind.code_restore import apply_overlay
from tilth.timeline.rewind.plan import RewindPlan
from tilth.timeline.rewind.snapshot_fork import (
    CHAT,
    chat_record,
    is_chat_fork,
    make_chat_directory,
    plan_chat_fork,
)
from tilth.timeline.rewind.state_restore import (
    cut_lines,
    remove_path,
    restore_counts,
    restore_files,
    restore_threads,
)

# Session files a fork copies; derived outputs (chat.html, summary.json...) are not: they
# describe the parent's run, and the fork regenerates its own.
COPIED_FILES = ("prd.json", "seed-meta.json", "progress.txt")
COPIED_DIRS = ("threads", "ledger", "tasks")


class ForkError(TilthError):
    """A fork cannot be made as asked."""


@dataclass
class ForkResult:
    """The new session and where it came from."""

    session: Session
    parent: Session
    checkpoint: Checkpoint
    worktree: Path
    notes: list[str] = field(default_factory=list)
    """Warnings from making the new worktree ready (a submodule not checked out)."""


def _copy_tree(src: Path, dst: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=True)


def _copy_prefix(src: Path, dst: Path, size: int) -> None:
    """The first ``size`` bytes of ``src`` (the event log as it was at the checkpoint)."""
    with open(src, "rb") as reader, open(dst, "wb") as writer:
        remaining = size
        while remaining > 0:
            chunk = reader.read(min(remaining, 1 << 20))
            if not chunk:
                break
            writer.write(chunk)
            remaining -= len(chunk)


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


def _new_child_id(sessions_dir: Path) -> str:
    while True:
        candidate = new_session_id()
        if not (sessions_dir / candidate).exists():
            return candidate


def _fork_of(plan: RewindPlan) -> tuple[dict[str, Any], Session, Checkpoint]:
    assert plan.fork is not None
    info = plan.fork
    child = Session(str(info["child"]), Path(str(info["sessions_dir"])) / str(info["child"]))
    return info, child, Checkpoint.from_dict(info["checkpoint"])


# ---- the executor's fork steps (each idempotent) ---------------------------------------------
def create_child(parent: Session, plan: RewindPlan) -> None:
    """The child's directory, marked incomplete until ``finish_child`` runs."""
    info, child, _ = _fork_of(plan)
    child.dir.mkdir(parents=True, exist_ok=True)
    child.events.path.touch()
    if child.checkpoint_path.is_file():
        return
    record: dict[str, Any] = {
        "schema": CHECKPOINT_SCHEMA,
        "session_id": child.id,
        "source": info["source"],
        "workspace": None,
        "branch": None,
        "status": "failed",
        "tokens_used": 0,
        "started_at": utc_now(),
        "fork_incomplete": True,
        "parent_session": parent.id,
    }
    if is_chat_fork(info):
        # Already a chat, so opening the half-made fork (`tilth chat --resume`) completes it.
        record.update(kind=CHAT, workspace=info["workspace"])
    atomic_write_json(child.checkpoint_path, record)


def copy_files(parent: Session, plan: RewindPlan) -> None:
    """The parent's session files, cut to the checkpoint (overwritten whole on a retry)."""
    info, child, target = _fork_of(plan)
    for name in COPIED_DIRS:
        remove_path(child.dir / name)
    _copy_files(parent, child, target, [int(s) for s in info.get("copy_seqs") or []])
    if is_chat_fork(info):
        # A chat checkpoint is the instant before its turn: the turn did not happen here.
        delete_after(child, target.seq - 1)


def make_worktree(parent: Session, plan: RewindPlan) -> None:
    """Branch ``session/<child>`` at the checkpoint's head, its overlay written over it; for
    a chat, its own directory written from snapshots."""
    info, child, target = _fork_of(plan)
    if is_chat_fork(info):
        make_chat_directory(parent, child, Path(str(info["workspace"])), target)
        return
    source = Path(str(info["source"]))
    worktree = git_worktrees.ensure_worktree(
        source, Path(str(info["workspace"])), str(info["branch"]), start=target.head
    )
    if target.overlay:
        apply_overlay(worktree, target.overlay, session_store(parent))


def finish_child(parent: Session, plan: RewindPlan) -> None:
    """The child's final ``checkpoint.json`` (with its lineage) and its ``fork`` event."""
    info, child, target = _fork_of(plan)
    workspace = Path(str(info["workspace"])).resolve()
    record = _child_record(
        parent.record().to_dict(),
        child,
        workspace,
        target,
        {"session": parent.id, "checkpoint": target.id, "label": target.label},
    )
    if is_chat_fork(info):
        record = chat_record(record, workspace, target)
    last = last_event(child.events.path) or {}
    payload = last.get("payload")
    done = isinstance(payload, dict) and payload.get("op") == plan.op_id
    if not (last.get("type") == "fork" and done):
        child.log(
            "fork",
            role="child",
            parent_session=parent.id,
            checkpoint=target.id,
            label=target.label,
            head=target.head,
            op=plan.op_id,
        )
    atomic_write_json(child.checkpoint_path, record)


def fork_result(parent: Session, plan: RewindPlan) -> ForkResult:
    """What a carried-out fork plan made."""
    info, child, target = _fork_of(plan)
    return ForkResult(child, parent, target, Path(str(info["workspace"])).resolve())


def _copy_files(parent: Session, child: Session, target: Checkpoint, seqs: list[int]) -> None:
    """Copy the parent's session files and cut them to ``target``."""
    for name in COPIED_FILES:
        src = parent.dir / name
        if src.is_file():
            shutil.copy2(src, child.dir / name)
    for name in COPIED_DIRS:
        _copy_tree(parent.dir / name, child.dir / name)
    events = parent.events.path
    if events.is_file():
        _copy_prefix(events, child.events.path, target.event_offset)
    state = HarnessState.from_dict(target.state)
    # Status and tokens go into checkpoint.json last, with the lineage: until then the
    # half-made fork stays marked failed.
    files = {k: v for k, v in state.to_dict().items() if k not in ("status", "tokens_used")}
    restore_files(child, files)
    if "ledger" not in state.damaged:
        restore_counts(child.ledger.directory, dict(state.ledger))
    if state.progress_lines is not None:
        cut_lines(child.progress_path, state.progress_lines)
    restore_threads(child.threads.directory, dict(target.threads))
    timeline_dir(child).mkdir(parents=True, exist_ok=True)
    remember_store(child, session_store(parent))
    for checkpoint in list_checkpoints(parent):
        if checkpoint.seq in seqs:
            write_checkpoint(child, checkpoint)
    if not checkpoint_path(child, target.seq).is_file():
        raise ForkError(f"checkpoint {target.id} could not be copied into the fork")


def _child_record(
    info: dict[str, Any],
    child: Session,
    worktree: Path,
    target: Checkpoint,
    forked_from: dict[str, Any],
) -> dict[str, Any]:
    """The fork's ``checkpoint.json``: the parent's, re-pointed and with its lineage."""
    record = {k: v for k, v in info.items() if k not in ("fork_incomplete",)}
    record.update(
        {
            "schema": CHECKPOINT_SCHEMA,
            "session_id": child.id,
            "workspace": str(worktree),
            "branch": child.branch,
            "started_at": utc_now(),
            "parent_session": forked_from["session"],
            "forked_from": {**forked_from, "head": target.head, "at": utc_now()},
        }
    )
    state = HarnessState.from_dict(target.state)
    if state.has("status"):
        record["status"] = state.status
    if state.has("tokens_used"):
        record["tokens_used"] = state.tokens_used
    return record


def resolve_fork_target(parent: Session, ref: str | None) -> Checkpoint:
    """The checkpoint named by ``--at`` (required: a fork point is a deliberate choice)."""
    if not ref:
        raise UsageError(
            "say where to fork from with --at <checkpoint>",
            hint=f"`tilth checkpoints {parent.id}` lists them",
        )
    return resolve_checkpoint(parent, ref)
