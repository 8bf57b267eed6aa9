"""The steps of a fork (``steps.MakeChild``): each idempotent, run journaled in the parent.

``fork-created`` makes the child's directory marked ``fork_incomplete``; ``fork-files``
copies the parent's session files cut to the checkpoint; ``fork-worktree`` makes the
branch and worktree (a chat: a directory of its own); ``fork-record`` writes the child's
final ``checkpoint.json`` and its ``fork`` event. The worktree's checkout (git's
``worktree add``, most of a large repository's fork) starts with ``fork-created`` and runs
beside the records until ``fork-worktree`` waits for it: a process killed meanwhile leaves
git finishing it, which ``fork-worktree`` run again waits for (``await_checkout``); a
process that ends otherwise (the fork cancelled) waits for it first (``settle_checkouts``).
``spec`` is the step's description of the new session (``rewind.fork.plan_fork`` makes it).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilth.errors import TilthError
from tilth.git import worktrees as git_worktrees
from tilth.git.refs import git_dirs
from tilth.session.events import utc_now
from tilth.session.files import atomic_write_json
from tilth.session.harness_state import HarnessState
from tilth.session.store import CHECKPOINT_SCHEMA, Session
from tilth.stops import stop_signals_interrupt
from tilth.timeline.record.blob_store import remember_store, session_store
from tilth.timeline.record.checkpoints import (
    Checkpoint,
    checkpoint_path,
    delete_after,
    list_checkpoints,
    timeline_dir,
    write_checkpoint,
)
from tilth.timeline.record.state_capture import last_event
from tilth.timeline.rewind.code_restore import apply_overlay
from tilth.timeline.rewind.snapshot_fork import (
    CHAT,
    chat_record,
    is_chat_fork,
    make_chat_directory,
)
from tilth.timeline.rewind.state_restore import (
    cut_lines,
    remove_path,
    restore_counts,
    restore_files,
    restore_threads,
)

FORK_STEPS = ("fork-created", "fork-files", "fork-worktree", "fork-record")
# Session files a fork copies; derived outputs (chat.html, summary.json...) are not: they
# describe the parent's run, and the fork regenerates its own.
COPIED_FILES = ("prd.json", "seed-meta.json", "progress.txt")
COPIED_DIRS = ("threads", "ledger", "tasks")


class ForkError(TilthError):
    """A fork cannot be made as asked."""


@dataclass
class _Checkout:
    """A worktree checkout running beside a fork's records (``_start_checkout``), on a
    thread of its own."""

    source: Path
    path: Path
    made: list[bool] = field(default_factory=list)
    """Once the thread ends: whether git made the worktree."""
    groups: list[int] = field(default_factory=list)
    """The git's pid (it leads its own process group) once it started."""
    done: threading.Event = field(default_factory=threading.Event)
    """Set as the thread ends. Waited on rather than ``Thread.join``: a join cut off by
    Ctrl-C marks the thread stopped though it runs on (Python 3.11), and later joins
    return at once."""


_checkouts: dict[str, _Checkout] = {}
"""The worktree checkouts running beside a fork's records, by operation id."""
_checkouts_lock = threading.Lock()
EXIT_WAIT_SECONDS = 60.0
"""How long a process ending (a fork cancelled, Ctrl-C) waits for its forks' checkouts."""


def fork_of(spec: dict[str, Any]) -> tuple[Session, Checkpoint]:
    """The new session and the checkpoint it is made at."""
    child = Session(str(spec["child"]), Path(str(spec["sessions_dir"])) / str(spec["child"]))
    return child, Checkpoint.from_dict(spec["checkpoint"])


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


def create_child(parent: Session, info: dict[str, Any], op_id: str) -> None:
    """The child's directory, marked incomplete until ``finish_child`` runs."""
    child, target = fork_of(info)
    child.dir.mkdir(parents=True, exist_ok=True)
    if not is_chat_fork(info):
        _start_checkout(info, target, op_id)
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


def copy_files(parent: Session, info: dict[str, Any], op_id: str) -> None:
    """The parent's session files, cut to the checkpoint (overwritten whole on a retry)."""
    child, target = fork_of(info)
    for name in COPIED_DIRS:
        remove_path(child.dir / name)
    _copy_files(parent, child, target, [int(s) for s in info.get("copy_seqs") or []])
    if is_chat_fork(info):
        # A chat checkpoint is the instant before its turn: the turn did not happen here.
        delete_after(child, target.seq - 1)


def make_worktree(parent: Session, info: dict[str, Any], op_id: str) -> None:
    """Branch ``session/<child>`` at the checkpoint's head, its overlay written over it; for
    a chat, its own directory written from snapshots."""
    child, target = fork_of(info)
    if is_chat_fork(info):
        make_chat_directory(parent, child, Path(str(info["workspace"])), target)
        return
    source = Path(str(info["source"]))
    path = Path(str(info["workspace"]))
    with _checkouts_lock:
        started = _checkouts.get(op_id)
    if started is not None:
        started.done.wait()  # (still listed meanwhile: cut off here, the exit waits for it)
        with _checkouts_lock:
            _checkouts.pop(op_id, None)
    if started is not None and started.made == [True]:
        worktree = path.resolve()  # made by the checkout started with the fork
    else:
        worktree = git_worktrees.ensure_worktree(source, path, str(info["branch"]), target.head)
    if target.overlay:
        apply_overlay(worktree, target.overlay, session_store(parent))


def _start_checkout(info: dict[str, Any], target: Checkpoint, op_id: str) -> None:
    """Start checking out the new worktree (a new branch at the checkpoint's head) in a
    thread, while the fork writes its records; ``make_worktree`` waits for it."""
    path = Path(str(info["workspace"])).absolute()
    with _checkouts_lock:
        if op_id in _checkouts or path.exists():
            return  # started already, or made (``make_worktree`` looks at what is there)
        source, branch = Path(str(info["source"])), str(info["branch"])

        def checkout() -> None:
            made = False  # (no process could start) make_worktree tries again and says why
            try:
                made = git_worktrees.add_new(
                    source, path, branch, target.head, started=job.groups.append
                )
            except Exception:
                pass
            finally:
                job.made.append(made)
                job.done.set()

        thread = threading.Thread(target=checkout, name="tilth-fork-checkout", daemon=True)
        job = _Checkout(source, path)
        _checkouts[op_id] = job
    thread.start()


def settle_checkouts(seconds: float | None = None) -> None:
    """Leave no fork's git running past this process (run at its exit): a fork cancelled
    (an error, Ctrl-C) while its checkout ran would leave that git writing on its own, in
    its own session, after Tilth is gone. Each is waited for (then the next command
    completes the fork with the worktree it made); one still running after ``seconds``, or
    when a second Ctrl-C cuts the wait, is killed with its process group and its half-made
    worktree removed, so the next command makes it again (``seconds``: ``EXIT_WAIT_SECONDS``)."""
    seconds = EXIT_WAIT_SECONDS if seconds is None else seconds
    with _checkouts_lock:
        jobs = [job for job in _checkouts.values() if not job.done.is_set()]
    if not jobs:
        return
    began = time.monotonic()
    # SIGTERM and SIGHUP cut the wait as a second Ctrl-C does (by now the run's own handlers
    # are gone, and their default would end the process with the git still running).
    with stop_signals_interrupt():
        for job in jobs:
            try:
                job.done.wait(max(seconds - (time.monotonic() - began), 0.0))
            except KeyboardInterrupt:
                pass
            if not job.done.is_set():
                _kill_checkout(job)


def _kill_checkout(job: _Checkout) -> None:
    """Kill a checkout's git and remove what it half made (``git worktree add``'s
    ``initializing`` lock, which would keep it from being pruned, then the tree)."""
    for group in job.groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    job.done.wait(5.0)
    dirs = git_dirs(job.path) if (job.path / ".git").exists() else None
    if dirs is not None:
        (dirs[0] / "locked").unlink(missing_ok=True)
    shutil.rmtree(job.path, ignore_errors=True)
    try:
        git_worktrees.prune(job.source)
    except TilthError:
        pass  # the next command's ``ensure_worktree`` prunes too


atexit.register(settle_checkouts)


def finish_child(parent: Session, info: dict[str, Any], op_id: str) -> None:
    """The child's final ``checkpoint.json`` (with its lineage) and its ``fork`` event."""
    child, target = fork_of(info)
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
    done = isinstance(payload, dict) and payload.get("op") == op_id
    if not (last.get("type") == "fork" and done):
        child.log(
            "fork",
            role="child",
            parent_session=parent.id,
            checkpoint=target.id,
            label=target.label,
            head=target.head,
            op=op_id,
        )
    atomic_write_json(child.checkpoint_path, record)


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


STEPS: dict[str, Callable[[Session, dict[str, Any], str], None]] = {
    "fork-created": create_child,
    "fork-files": copy_files,
    "fork-worktree": make_worktree,
    "fork-record": finish_child,
}
"""The fork's journal steps (``FORK_STEPS``): ``(parent, spec, op id)``."""
