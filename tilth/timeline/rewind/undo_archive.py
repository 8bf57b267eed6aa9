"""The undo archive: recording a go-back's undo point, and what an undo brings back.

Before a go-back changes anything, the executor's ``before`` step (``steps.RecordUndo``)
records the current state as a checkpoint of kind ``before-<verb>`` and archives, next to
it in ``timeline/undo/cp-NNNN/``, what each step of the plan is about to destroy (each
step's ``record_undo``: the log's tail, the threads, the ledgers, the checkpoint files).
The restores here are the steps an undo (``rewind.undo``) runs to bring those back.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from tilth import git
from tilth.session.events import utc_now
from tilth.session.files import atomic_write_json, fsync_dir
from tilth.session.schemas import SCHEMAS
from tilth.session.store import Session
from tilth.timeline.record.blob_store import (
    git_blob_sha,
    read_state_in,
    register_root,
    remember_store,
    session_store,
    store_state,
)
from tilth.timeline.record.checkpoints import (
    Checkpoint,
    checkpoint_id,
    checkpoint_path,
    list_checkpoints,
    read_checkpoint,
    timeline_dir,
    write_checkpoint,
)
from tilth.timeline.record.git_reads import TreeCache, dirty_paths
from tilth.timeline.record.state_capture import capture_state, log_tail, thread_heads
from tilth.timeline.record.turn_capture import live_changes
from tilth.timeline.rewind.code_state import recorded_code_state
from tilth.timeline.rewind.snapshot_restore import is_snapshot_session
from tilth.timeline.rewind.state_restore import cut_events, remove_path
from tilth.timeline.rewind.step_base import PlanView

ARCHIVE_SCHEMA = SCHEMAS["archive"]
NO_CAP = 1 << 62


def archive_dir(session: Session, seq: int) -> Path:
    return timeline_dir(session) / "undo" / checkpoint_id(seq)


# ---- recording (the executor's ``before`` step) ------------------------------------------------
def record_before(session: Session, plan: PlanView) -> Checkpoint:
    """Record the state before ``plan`` runs, and archive what it will destroy. Idempotent:
    the checkpoint file is written last, so its presence means the step is complete."""
    assert plan.before is not None and plan.before_seq is not None
    seq = plan.before_seq
    path = checkpoint_path(session, seq)
    if path.is_file():
        return read_checkpoint(session, path)
    worktree = Path(plan.worktree)
    head, overlay = _code_now(session, worktree, plan)
    archive = archive_dir(session, seq)
    _write_archive(session, plan, archive)
    size, event_seq = log_tail(session.events.path)
    checkpoint = Checkpoint(
        id=checkpoint_id(seq),
        seq=seq,
        kind=plan.before,
        ts=utc_now(),
        label=f"before {plan.op.replace('_', ' ')} to {plan.target}",
        task_id=None,
        stage=None,
        turn=None,
        actor=None,
        head=head,
        event_offset=size,
        event_seq=event_seq,
        state=capture_state(session),
        threads=thread_heads(session.threads.directory),
        overlay=overlay,
        archive=archive.relative_to(session.dir).as_posix(),
    )
    write_checkpoint(session, checkpoint)
    return checkpoint


def _code_now(session: Session, worktree: Path, plan: PlanView) -> tuple[str, dict[str, Any]]:
    """HEAD and every uncommitted file (or, without git, every file the plan writes)."""
    if not worktree.is_dir():
        return "", {}
    store = session_store(session)
    # Like a turn capture: tell retention where this session lives, so it keeps the blobs.
    register_root(store, session.dir.parent)
    remember_store(session, store)
    if plan.snapshot_code or is_snapshot_session(session):
        # No git (a chat): the files this go-back rewrites, as they are now.
        paths = [p for _, p in plan.files] + list(plan.keep)
        head = ""
    else:
        head = git.head(worktree)
        paths = _uncommitted(session, worktree, head, plan)
    overlay: dict[str, Any] = {}
    dirs: dict[str, bool] = {}
    for rel in sorted(set(paths)):
        state = read_state_in(worktree, rel, dirs)
        # The user's files: no size cap, or undo could not give them back.
        overlay[rel] = None if state is None else store_state(store, rel, state, NO_CAP).entry
    store.sync()
    return head, overlay


def _uncommitted(session: Session, worktree: Path, head: str, plan: PlanView) -> list[str]:
    """Paths that differ from HEAD, as far as going back and undoing it can tell them apart.

    The latest recorded state's uncommitted files, what moved since, and every file the plan
    writes or keeps, plus a live change feed's when this process has one: the cost follows
    the change. Edits outside those are never touched by the go-back, nor by its undo. A
    forced plan (it overwrites everything that differs) walks the worktree once.
    """
    latest_head, latest_overlay = recorded_code_state(session)
    if latest_head is None or plan.force or git.rev_parse(latest_head, worktree) is None:
        return dirty_paths(worktree)
    changed = live_changes(worktree) or set()
    planned = {rel for _, rel in plan.files} | set(plan.keep) | set(plan.conflicts)
    candidates = changed | set(latest_overlay) | planned
    candidates |= git.paths_between(worktree, latest_head, head)
    tree = TreeCache(worktree).entries(head, candidates)
    differ = []
    dirs: dict[str, bool] = {}
    for rel in sorted(candidates):
        state = read_state_in(worktree, rel, dirs)
        if state is None:
            if rel in tree:
                differ.append(rel)
        elif (state.git_mode, git_blob_sha(state.data)) != tree.get(rel):
            differ.append(rel)
    return differ


def _write_archive(session: Session, plan: PlanView, archive: Path) -> None:
    """Copy what ``plan`` destroys into ``archive`` (rebuilt whole if a crash tore it)."""
    building = archive.with_name(archive.name + ".tmp")
    remove_path(building)
    remove_path(archive)
    building.mkdir(parents=True)
    (building / "checkpoints").mkdir()
    meta: dict[str, Any] = {"schema": ARCHIVE_SCHEMA, "event_cut": None}
    for step in plan.steps:
        step.record_undo(session, building, meta)
    meta["checkpoint_set"] = [c.seq for c in list_checkpoints(session) if not c.is_before]
    head, overlay = recorded_code_state(session, agent=True)
    if head is not None:
        # What the agent had written, as opposed to the whole tree the undo point holds.
        meta["recorded"] = {"head": head, "overlay": overlay}
    atomic_write_json(building / "archive.json", meta)
    os.replace(building, archive)
    fsync_dir(archive.parent)


def copy_tail(path: Path, offset: int, target: Path) -> None:
    """The bytes of ``path`` from ``offset`` on, into ``target``."""
    with open(path, "rb") as reader, open(target, "wb") as out:
        reader.seek(offset)
        shutil.copyfileobj(reader, out)


def copy_dir(source: Path, target: Path, pattern: str) -> None:
    target.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        for path in source.glob(pattern):
            shutil.copy2(path, target / path.name)


# ---- the undo's restores from an archive ---------------------------------------------------
def restore_archived_threads(session: Session, archive: str) -> None:
    source = session.dir / archive / "threads"
    if not source.is_dir():
        return
    target = session.threads.directory
    target.mkdir(parents=True, exist_ok=True)
    for path in source.glob("*.jsonl"):
        tmp = target / f".{path.name}.undo"
        shutil.copy2(path, tmp)
        os.replace(tmp, target / path.name)


def restore_archived_ledger(session: Session, archive: str) -> None:
    source = session.dir / archive
    if not (source / "ledger").is_dir():
        return
    ledger = session.ledger.directory
    ledger.mkdir(parents=True, exist_ok=True)
    kept = {p.name for p in (source / "ledger").glob("*.jsonl")}
    for path in ledger.glob("*.jsonl"):
        if path.name not in kept:
            path.unlink()
    for name in kept:
        shutil.copy2(source / "ledger" / name, ledger / name)
    progress = source / "progress.txt"
    if progress.is_file():
        shutil.copy2(progress, session.progress_path)
    else:
        session.progress_path.unlink(missing_ok=True)


def splice_events(session: Session, archive: str, cut: int, op: str) -> None:
    """The log as it was: cut at ``cut``, then the archived tail (absolute, repeatable).
    The cut is counted (``record.log_epoch``) before the tail goes back on."""
    cut_events(session, cut, op)
    tail = session.dir / archive / "events.tail"
    if tail.is_file():
        with open(tail, "rb") as reader, open(session.events.path, "ab") as out:
            shutil.copyfileobj(reader, out)
            out.flush()
            os.fsync(out.fileno())


def restore_archived_checkpoints(session: Session, archive: str, keep: list[int]) -> None:
    """Exactly ``keep`` (plus every ``before-`` checkpoint): the archived ones come back."""
    wanted = set(keep)
    for checkpoint in list_checkpoints(session):
        if not checkpoint.is_before and checkpoint.seq not in wanted:
            checkpoint_path(session, checkpoint.seq).unlink(missing_ok=True)
    source = session.dir / archive / "checkpoints"
    if source.is_dir():
        for path in source.glob("cp-*.json"):
            data = json.loads(path.read_text("utf-8"))
            if isinstance(data, dict) and data.get("seq") in wanted:
                target = checkpoint_path(session, int(data["seq"]))
                if not target.is_file():
                    shutil.copy2(path, target)


def prune_archives(session: Session) -> None:
    """Delete the archives whose undo point is gone (a reset to the seed deletes them)."""
    root = timeline_dir(session) / "undo"
    if not root.is_dir():
        return
    for path in root.iterdir():
        name = path.name.removesuffix(".tmp")
        if name.startswith("cp-") and name[3:].isdigit():
            if not checkpoint_path(session, int(name[3:])).is_file() and not path.name.endswith(
                ".tmp"
            ):
                remove_path(path)
