"""Forking: a new session whose code, conversation and harness state equal one checkpoint.

The new session gets its own id, branch (``session/<new>``, created at the checkpoint's
head) and worktree (the overlay applied on top). Its files are copies of the parent's,
cut to the checkpoint: the event log to ``event_offset``, threads to their heads (through
summaries), ledgers to their counts, prd/tasks/tokens/status from the recorded state, and
the checkpoints up to and including the target. ``checkpoint.json`` names
``parent_session`` and ``forked_from``. The parent is only read, apart from one line in
its operations log; it is locked meanwhile so nothing moves under the copy.

A fork interrupted half-way leaves a session marked ``fork_incomplete`` (status
``failed``); ``tilth reset <id>`` discards it.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilth import git
from tilth.errors import TilthError, UsageError
from tilth.session.events import utc_now
from tilth.session.files import atomic_write_json
from tilth.session.store import CHECKPOINT_SCHEMA, Session
from tilth.timeline.faults import fault_point
from tilth.timeline.record.blob_store import remember_store, session_store
from tilth.timeline.record.checkpoints import (
    Checkpoint,
    checkpoint_path,
    list_checkpoints,
    resolve_checkpoint,
    timeline_dir,
    write_checkpoint,
)
from tilth.timeline.record.state_capture import worktree_of
from tilth.timeline.rewind.code_restore import apply_overlay
from tilth.timeline.rewind.journal import log_operation
from tilth.timeline.rewind.plan import new_op_id
from tilth.timeline.rewind.state_restore import (
    cut_lines,
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


def fork_session(parent: Session, target: Checkpoint, sessions_dir: Path) -> ForkResult:
    """Make the new session. The caller holds the parent's lock."""
    info = parent.checkpoint()
    source = Path(str(info.get("source") or ""))
    if not info.get("source") or not source.is_dir():
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
    child = Session.create(
        sessions_dir, source, status="failed", fork_incomplete=True, parent_session=parent.id
    )
    fault_point("fork-created")
    _copy_files(parent, child, target)
    fault_point("fork-files")
    new_worktree = git.ensure_worktree(source, child.workspace_dir, child.branch, start=target.head)
    if target.overlay:
        apply_overlay(new_worktree, target.overlay, session_store(parent))
    fault_point("fork-worktree")
    op_id = new_op_id()
    forked_from = {"session": parent.id, "checkpoint": target.id, "label": target.label}
    record = _child_record(info, child, new_worktree, target, forked_from)
    atomic_write_json(child.checkpoint_path, record)
    child.log(
        "fork",
        role="child",
        parent_session=parent.id,
        checkpoint=target.id,
        label=target.label,
        head=target.head,
        op=op_id,
    )
    log_operation(
        parent,
        op_id,
        "fork",
        target=target.id,
        label=target.label,
        child_session=child.id,
        head=target.head,
    )
    return ForkResult(child, parent, target, new_worktree)


def _copy_files(parent: Session, child: Session, target: Checkpoint) -> None:
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
    state = dict(target.state)
    # Status and tokens go into checkpoint.json last, with the lineage: until then the
    # half-made fork stays marked failed.
    restore_files(child, {k: v for k, v in state.items() if k not in ("status", "tokens_used")})
    restore_counts(child.ledger.directory, dict(state.get("ledger") or {}))
    lines = state.get("progress_lines")
    if isinstance(lines, int):
        cut_lines(child.progress_path, lines)
    restore_threads(child.threads.directory, dict(target.threads))
    timeline_dir(child).mkdir(parents=True, exist_ok=True)
    remember_store(child, session_store(parent))
    for checkpoint in list_checkpoints(parent):
        if checkpoint.seq <= target.seq:
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
    state = target.state
    if "status" in state:
        record["status"] = state["status"]
    if "tokens_used" in state:
        record["tokens_used"] = state["tokens_used"]
    return record


def resolve_fork_target(parent: Session, ref: str | None) -> Checkpoint:
    """The checkpoint named by ``--at`` (required: a fork point is a deliberate choice)."""
    if not ref:
        raise UsageError(
            "say where to fork from with --at <checkpoint>",
            hint=f"`tilth checkpoints {parent.id}` lists them",
        )
    return resolve_checkpoint(parent, ref)
