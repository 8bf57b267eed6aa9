"""The pure half of going back: what a rewind will change (planning never writes)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from tilth import git
from tilth.errors import UsageError
from tilth.session.store import Session
from tilth.timeline.record.blob_store import session_store
from tilth.timeline.record.checkpoints import Checkpoint, stored_seqs
from tilth.timeline.record.dir_state import is_manifest_head
from tilth.timeline.record.git_reads import dirty_paths
from tilth.timeline.record.state_capture import capture_state, log_tail, task_statuses, worktree_of
from tilth.timeline.rewind.change_report import tally_events, thread_drops, tree_changes
from tilth.timeline.rewind.code_only import wind_back_tasks
from tilth.timeline.rewind.code_restore import (
    Overlay,
    keep_conflicts,
    plan_code,
    recorded_code_state,
)
from tilth.timeline.rewind.plan import SCOPES, RewindError, RewindPlan, new_op_id
from tilth.timeline.rewind.snapshot_restore import plan_snapshot_files, snapshot_report


# ---- shared report builders -----------------------------------------------------------------
def report_code(plan: RewindPlan, worktree: Path, head: str) -> None:
    """Fill the file, commit and conflict lines for a reset of ``worktree`` to ``head``."""
    current = git.head(worktree)
    plan.files = tree_changes(worktree, head)
    plan.commits_dropped = git.commits_between(head, current, worktree)
    plan.commits_restored = git.commits_between(current, head, worktree)
    plan.conflicts = dirty_paths(worktree)


def report_events(plan: RewindPlan, session: Session, offset: int, seq: int) -> None:
    """Fill the event lines for a cut of the log at ``offset`` (after event ``seq``)."""
    size, last_seq = log_tail(session.events.path)
    if offset > size:
        # Only possible when an earlier cut went below this checkpoint (a reset to the seed
        # cuts at seed_committed, before the seed checkpoint was recorded): nothing to cut.
        plan.warnings.append(
            f"the event log ({size} bytes) is already shorter than at this checkpoint "
            f"({offset} bytes); no events are dropped"
        )
        return
    plan.events_dropped = max(0, last_seq - seq) if last_seq else 0
    plan.event_types = tally_events(session.events.path, offset)
    if not plan.events_dropped:
        plan.events_dropped = sum(plan.event_types.values())


def report_state(plan: RewindPlan, session: Session, state: dict[str, Any]) -> None:
    """Fill the task status changes between now and ``state``."""
    now = task_statuses(capture_state(session).get("prd"))
    then = task_statuses(state.get("prd"))
    plan.task_changes = [
        (tid, now.get(tid, "-"), then[tid]) for tid in then if now.get(tid, "-") != then[tid]
    ]


def report_threads(plan: RewindPlan, session: Session, heads: dict[str, str | None]) -> None:
    plan.messages_dropped, plan.threads_deleted = thread_drops(session.threads.directory, heads)


def plan_rewind(
    session: Session, target: Checkpoint, scope: str, *, force: bool = False
) -> RewindPlan:
    """What ``tilth rewind --to <target> --scope <scope>`` will change (no writes)."""
    if scope not in SCOPES:
        raise UsageError(f"--scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    worktree = worktree_of(session)
    if scope != "conversation" and not worktree.is_dir():
        raise RewindError(
            f"the worktree of session {session.id} is missing ({worktree})",
            hint=f"`tilth doctor {session.id} --repair` re-creates it (so does `tilth resume`); "
            "or use --scope conversation",
        )
    plan = RewindPlan(
        op="rewind",
        op_id=new_op_id(),
        session_id=session.id,
        target=target.id,
        target_label=target.label,
        scope=scope,
        worktree=str(worktree),
        headline=f"rewind session {session.id} to {target.id} ({target.label}), scope {scope}",
    )
    if scope in ("both", "code") and is_manifest_head(target.head):
        # A session without git (chat): files from snapshots only (rewind.snapshot_restore).
        plan.head = target.head
        code = plan_snapshot_files(session, worktree, target.head, target.overlay, force=force)
        snapshot_report(plan, code)
        plan.force = force
        plan.warnings += [f"{target.id}: {gap}" for gap in target.gaps]
    elif scope in ("both", "code"):
        if git.rev_parse(target.head, worktree) is None:
            raise RewindError(
                f"the commit {target.head[:12]} of {target.id} no longer exists",
                hint="it may have been garbage-collected; pick a later checkpoint",
            )
        plan.head = target.head
        plan.overlay = dict(target.overlay)
        report_code(plan, worktree, target.head)
        # Turn snapshots: the exact file list, and conflicts = files the user edited since
        # the latest recorded state (kept unless --force). See rewind.code_restore.
        plan.force = force
        report_turn_code(plan, session, target.head, plan.overlay)
        plan.warnings += [f"{target.id}: {gap}" for gap in target.gaps]
    if scope in ("both", "conversation"):
        plan.state = dict(target.state)
        plan.threads = dict(target.threads)
        plan.event_offset = target.event_offset
        plan.keep_through_seq = target.seq
        if is_manifest_head(target.head):
            # A chat checkpoint is the instant before its turn: going back there undoes the
            # turn, so its checkpoint goes too (the next prompt records a fresh one).
            plan.keep_through_seq = target.seq - 1
        plan.checkpoints_dropped = sum(1 for s in stored_seqs(session) if s > plan.keep_through_seq)
        report_state(plan, session, target.state)
        report_threads(plan, session, target.threads)
        report_events(plan, session, target.event_offset, target.event_seq)
    if scope == "code":
        wind_back_tasks(plan, session, target.head, worktree)
        thread = most_recent_thread(session, among=plan.threads)
        if thread is not None:
            plan.note = {
                "thread": thread,
                "text": f"[tilth] The files in the worktree were restored to checkpoint "
                f"{target.id} ({target.label}). The conversation was kept; files may differ "
                "from what earlier messages describe.",
            }
    plan.event = {
        "type": "rewind",
        "payload": {"to": target.id, "scope": scope, "op": plan.op_id},
    }
    return plan


def most_recent_thread(session: Session, among: dict[str, Any] | None = None) -> str | None:
    """The thread written to last (by modification time), or None when there are none.

    With ``among``, only those threads count (the ones a plan keeps).
    """
    directory = session.threads.directory
    if not directory.is_dir():
        return None
    paths = [p for p in directory.glob("*.jsonl") if among is None or p.stem in among]
    if not paths:
        return None
    return max(paths, key=lambda p: (p.stat().st_mtime_ns, p.name)).stem


def counter_dict(counter: Counter[str]) -> dict[str, int]:
    return dict(sorted(counter.items()))


def report_turn_code(plan: RewindPlan, session: Session, head: str, overlay: Overlay) -> None:
    """Fill ``plan``'s file list, conflicts and kept files for restoring (head, overlay).

    A conflict is a file whose content differs from the latest recorded state: the user
    edited it since. It is kept (its current content is stored now and written back after
    the restore) unless ``plan.force``.
    """
    worktree = Path(plan.worktree)
    latest_head, latest_overlay = recorded_code_state(session)
    if latest_head is not None and git.rev_parse(latest_head, worktree) is None:
        # The branch was rewritten by hand and the commit collected: there is no known
        # "last written by the agent" state to compare with, so no conflicts can be told.
        plan.warnings.append(
            f"the latest recorded commit {latest_head[:12]} is gone; edits made by hand "
            "since then cannot be told apart and are not protected"
        )
        latest_head, latest_overlay = None, {}
    code = plan_code(worktree, head, overlay, latest_head, latest_overlay, force=plan.force)
    keep_conflicts(code, worktree, session_store(session))
    plan.files = sorted(
        [("restore", p) for p in code.restore] + [("delete", p) for p in code.delete],
        key=lambda item: item[1],
    )
    plan.conflicts = code.conflicts
    plan.keep = code.keep
