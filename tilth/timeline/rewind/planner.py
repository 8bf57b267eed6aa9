"""The one planner: a ``Target`` in, the ``RewindPlan`` the executor runs out (never writes).

Every go-back is a target — where to go (a checkpoint's code, conversation and harness
state), in which scope, with the verb's adjustments (a restart stashes and sets a task
pending, a reset deletes derived files, an undo restores from its archive). Each part of
the planner returns a value (``CodePart``, ``HistoryPart``) and ``plan`` assembles them into
the plan's frozen steps (``rewind.steps``), so no verb fills a plan by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tilth import git
from tilth.errors import GitError
from tilth.session.harness_state import HarnessState
from tilth.session.store import Session
from tilth.timeline.record.blob_store import session_store
from tilth.timeline.record.checkpoints import Checkpoint, highest_seq, read_timeline
from tilth.timeline.record.dir_state import is_manifest_head
from tilth.timeline.record.git_reads import dirty_paths
from tilth.timeline.record.state_capture import log_tail, read_harness_state, worktree_of
from tilth.timeline.record.turn_capture import live_changes
from tilth.timeline.rewind.change_report import tally_events, thread_drops, tree_changes
from tilth.timeline.rewind.code_only import wind_back_tasks
from tilth.timeline.rewind.code_restore import Overlay, keep_conflicts, plan_code
from tilth.timeline.rewind.code_state import recorded_code_state
from tilth.timeline.rewind.plan import RewindError, RewindPlan, new_op_id
from tilth.timeline.rewind.snapshot_restore import is_snapshot_session, plan_snapshot_files
from tilth.timeline.rewind.steps import (
    AddNote,
    CutEvents,
    CutThreads,
    DeletePaths,
    DropCheckpoints,
    Graft,
    LogEvent,
    MakeChild,
    RecordUndo,
    RestoreCode,
    RestoreState,
    Stash,
    Step,
    Unwind,
)
from tilth.timeline.rewind.targets import HistoryGoal, Target, checkpoint_target
from tilth.timeline.rewind.undo import archive_part, undo_target


# ---- the parts ---------------------------------------------------------------------------------
@dataclass
class CodePart:
    """What restoring the code changes: files, commits, conflicts and kept edits."""

    files: list[tuple[str, str]] = field(default_factory=list)
    commits_dropped: list[tuple[str, str]] = field(default_factory=list)
    commits_restored: list[tuple[str, str]] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    keep: Overlay = field(default_factory=dict)
    overlay: Overlay = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def git_code_part(session: Session, worktree: Path, target: Target, survey: bool) -> CodePart:
    """Reset to the target's head + overlay: the exact file list, commits, and the user's
    edits (``survey``: see ``plan``)."""
    assert target.code is not None
    goal = target.code
    current = git.head(worktree)
    try:
        apart = git.commits_apart(goal.head, current, worktree)
    except GitError:
        if git.rev_parse(goal.head, worktree) is None:
            raise RewindError(
                f"the commit {goal.head[:12]} of {target.ref} no longer exists",
                hint="it may have been garbage-collected; pick a later checkpoint",
            ) from None
        raise
    part = CodePart(overlay=dict(goal.overlay))
    part.commits_restored, part.commits_dropped = apart
    if target.checkpoint is None:
        # No snapshot to compare with (a restart to a bare commit): git's view only.
        part.files = tree_changes(worktree, goal.head)
        part.conflicts = dirty_paths(worktree)
        return part
    # Undo and redo compare with the tree Tilth last wrote; every other go-back with what
    # the agent wrote, so the user's files an undo put back stay the user's (code_state).
    latest_head, latest_overlay = recorded_code_state(session, agent=target.op != "undo")
    if latest_head is not None and git.rev_parse(latest_head, worktree) is None:
        # The branch was rewritten by hand and the commit collected: there is no known
        # "last written by the agent" state to compare with, so no conflicts can be told.
        part.warnings.append(
            f"the latest recorded commit {latest_head[:12]} is gone; edits made by hand "
            "since then cannot be told apart and are not protected"
        )
        latest_head, latest_overlay = None, {}
    force = goal.force or goal.stash_message is not None
    changed = live_changes(worktree)
    if changed is None and not (force or survey):
        # No walk: edits outside the files this go-back writes are left alone (and, unless
        # surveyed, unlisted); the ones inside it are found by reading just those files.
        changed = set()
    code = plan_code(
        worktree,
        goal.head,
        part.overlay,
        latest_head,
        latest_overlay,
        force=force,
        changed=changed,
    )
    if goal.stash_message is None:
        keep_conflicts(code, worktree, session_store(session))
        part.conflicts, part.keep = code.conflicts, code.keep
    else:
        # A restart stashes every uncommitted change instead of carrying edits across.
        part.conflicts = dirty_paths(worktree)
    part.files = sorted(
        [("restore", p) for p in code.restore] + [("delete", p) for p in code.delete],
        key=lambda item: item[1],
    )
    return part


def snapshot_code_part(session: Session, worktree: Path, target: Target) -> CodePart:
    """A session without git (chat): files from snapshots only — no commits, no reset, no
    clean (``rewind.snapshot_restore``; chat capture records the manifests it reads)."""
    assert target.code is not None
    goal = target.code
    code = plan_snapshot_files(session, worktree, goal.head, goal.overlay, force=goal.force)
    return CodePart(
        files=sorted(
            [("restore", p) for p in code.restore] + [("delete", p) for p in code.delete],
            key=lambda item: item[1],
        ),
        conflicts=list(code.conflicts),
        overlay=dict(code.overlay),
    )


@dataclass
class HistoryPart:
    """What going back in the conversation, the harness state and the log drops."""

    events_dropped: int = 0
    event_types: dict[str, int] = field(default_factory=dict)
    task_changes: list[tuple[str, str, str]] = field(default_factory=list)
    messages_dropped: dict[str, int] = field(default_factory=dict)
    threads_deleted: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def events_part(session: Session, offset: int, seq: int) -> HistoryPart:
    """The events a cut of the log at ``offset`` (after event ``seq``) drops."""
    part = HistoryPart()
    size, last_seq = log_tail(session.events.path)
    if offset > size:
        # Only possible when an earlier cut went below this checkpoint (a reset to the seed
        # cuts at seed_committed, before the seed checkpoint was recorded): nothing to cut.
        part.warnings.append(
            f"the event log ({size} bytes) is already shorter than at this checkpoint "
            f"({offset} bytes); no events are dropped"
        )
        return part
    part.events_dropped = max(0, last_seq - seq) if last_seq else 0
    part.event_types = tally_events(session.events.path, offset)
    if not part.events_dropped:
        part.events_dropped = sum(part.event_types.values())
    return part


def task_changes(session: Session, state: HarnessState) -> list[tuple[str, str, str]]:
    """``(task, now, then)`` for every task whose status ``state`` changes."""
    now = read_harness_state(session).task_statuses()
    then = state.task_statuses()
    return [(t, now.get(t, "-"), then[t]) for t in then if now.get(t, "-") != then[t]]


def history_part(session: Session, goal: HistoryGoal) -> HistoryPart:
    part = HistoryPart()
    if goal.event_offset is not None:
        part = events_part(session, goal.event_offset, goal.event_seq)
    if goal.state is not None:
        part.task_changes = task_changes(session, HarnessState.from_dict(goal.state))
    if goal.threads is not None:
        part.messages_dropped, part.threads_deleted = thread_drops(
            session.threads.directory, goal.threads
        )
    return part


def later_checkpoints(
    session: Session, keep_through: int, *, undo_points: bool = False
) -> list[int]:
    """The checkpoints after ``keep_through`` (undo points only with ``undo_points``): what
    a cut deletes (one whose state cannot be read too: its states are not read)."""
    return [
        c.seq
        for c in read_timeline(session, resolve=False).checkpoints
        if c.seq > keep_through and (undo_points or not c.is_before)
    ]


# ---- assembling ----------------------------------------------------------------------------------
def plan(session: Session, target: Target, *, survey: bool = False) -> RewindPlan:
    """The plan for ``target``: the steps the executor runs and the report a user reads.

    ``survey`` walks the worktree for every edit made since the latest recorded state, for
    a person to read (dry run, confirmation); without it only the files the plan changes
    are looked at, so planning costs what differs, not the size of the repository.
    """
    worktree = worktree_of(session)
    goal, history, extras = target.code, target.history, target.extras
    if goal is not None and not worktree.is_dir():
        raise RewindError(
            f"the worktree of session {session.id} is missing ({worktree})",
            hint=f"`tilth doctor {session.id} --repair` re-creates it (so does `tilth resume`); "
            "or use --scope conversation",
        )
    details, warnings = list(target.details), list(target.warnings)
    code = code_step(session, worktree, target, survey, warnings)
    told = history_part(session, history)
    warnings += told.warnings
    state, threads = history.state, history.threads
    changes, messages, deleted = told.task_changes, told.messages_dropped, told.threads_deleted
    drops: DropCheckpoints | None = None
    if history.keep_through_seq is not None:
        # Undo points stay, unless the go-back cannot be undone (a reset to the seed).
        seqs = later_checkpoints(session, history.keep_through_seq, undo_points=not extras.undoable)
        drops = DropCheckpoints(history.keep_through_seq, tuple(seqs), count=len(seqs))
    part = archive_part(session, target) if extras.archive is not None else None
    if part is not None:
        # An undo: restore from the archive, keep exactly its checkpoint set, splice the log.
        drops = DropCheckpoints(
            history.keep_through_seq,
            tuple(part.drop_seqs),
            tuple(part.keep_seqs),
            part.archive,
            len(part.drop_seqs),
        )
        code = replace(code, recorded=part.recorded) if code is not None else None
        details += part.details
    if target.scope == "code" and code is not None and code.head is not None:
        # No done task without its code (code_only.py): the tasks whose commits go wind back.
        wound = wind_back_tasks(session, code.head, worktree)
        if wound is not None:
            state, changes = wound.state.to_dict(), wound.task_changes
            if wound.threads is not None:
                threads, messages = wound.threads, wound.messages_dropped
                deleted = wound.threads_deleted
            details += wound.details
    archive = part.archive if part is not None else None
    steps: list[Step] = []
    if extras.undoable:
        steps.append(RecordUndo(f"before-{target.op}", highest_seq(session) + 1))
    if goal is not None and goal.stash_message is not None and code and code.head is not None:
        steps.append(Stash(goal.stash_message))
    steps += [code] if code is not None else []
    steps += [Unwind(extras.unwind)] if extras.unwind is not None else []
    if state is not None:
        steps.append(RestoreState(state, tuple(changes), archive))
    if threads is not None:
        steps.append(CutThreads(threads, messages, tuple(deleted), archive))
    note = restored_note(session, target, state, threads) if extras.note else None
    steps += [note] if note is not None else []
    steps += [DeletePaths(extras.delete_paths)] if extras.delete_paths else []
    if history.event_offset is not None:
        cut = part.event_cut if part is not None else None
        steps.append(
            CutEvents(history.event_offset, told.events_dropped, told.event_types, archive, cut)
        )
    steps += [drops] if drops is not None else []
    steps += [MakeChild(extras.fork)] if extras.fork is not None else []
    if target.event is not None:
        steps.append(LogEvent(str(target.event["type"]), dict(target.event.get("payload", {}))))
    return RewindPlan(
        op=target.op,
        op_id=new_op_id(),
        session_id=session.id,
        target=target.ref,
        target_label=target.label,
        scope=target.scope,
        worktree=str(worktree),
        headline=target.headline.replace("{session}", session.id),
        steps=tuple(steps),
        details=details,
        warnings=warnings,
    )


def code_step(
    session: Session, worktree: Path, target: Target, survey: bool, warnings: list[str]
) -> RestoreCode | None:
    """Restoring the target's code, with the files, commits and conflicts it touches (its
    warnings go first in ``warnings``); None when the code is left alone."""
    goal = target.code
    if goal is None:
        return None
    snapshots = is_snapshot_session(session) or is_manifest_head(goal.head)
    if snapshots:
        part = snapshot_code_part(session, worktree, target)
        head = goal.head if is_manifest_head(goal.head) else None
    else:
        part = git_code_part(session, worktree, target, survey)
        head = goal.head
    warnings[:0] = part.warnings
    return RestoreCode(
        head,
        part.overlay,
        part.keep,
        goal.force,
        snapshots,
        tuple(part.files),
        tuple(part.commits_dropped),
        tuple(part.commits_restored),
        tuple(part.conflicts),
    )


def restored_note(
    session: Session,
    target: Target,
    state: dict[str, Any] | None,
    threads: dict[str, str | None] | None,
) -> AddNote | None:
    """The "files were restored" note, in the thread the worker will read next."""
    typed = None if state is None else HarnessState.from_dict(state)
    thread = next_worker_thread(session, typed, threads)
    if thread is None:
        return None
    return AddNote(
        thread,
        f"[tilth] The files in the worktree were restored to checkpoint "
        f"{target.ref} ({target.label}). The conversation was kept; files may differ "
        "from what earlier messages describe.",
    )


def next_worker_thread(
    session: Session,
    state: HarnessState | None = None,
    keep: dict[str, str | None] | None = None,
) -> str | None:
    """The thread the worker continues in: the open task's current stage, else the most
    recent worker thread, else the most recent thread (never an evaluator's when a worker's
    exists). ``state`` and ``keep`` are the harness state and thread heads after the plan
    (None: as they are now)."""
    state = state if state is not None else read_harness_state(session)
    directory = session.threads.directory

    def usable(path: Path) -> bool:
        return path.is_file() and (keep is None or path.stem in keep)

    for task in state.prd or ():
        if not task.is_open:
            continue
        record = state.tasks.get(task.id)
        stage = record.get("current_stage") if isinstance(record, dict) else None
        key = f"worker.{task.id}.{stage}"
        if stage and usable(directory / f"{key}.jsonl"):
            return key
        break
    paths = list(directory.glob("*.jsonl")) if directory.is_dir() else []
    for group in ([p for p in paths if p.name.startswith("worker.")], paths):
        candidates = [p for p in group if usable(p)]
        if candidates:
            return max(candidates, key=lambda p: (p.stat().st_mtime_ns, p.name)).stem
    return None


def plan_rewind(
    session: Session, target: Checkpoint, scope: str, *, force: bool = False, survey: bool = False
) -> RewindPlan:
    """What ``tilth rewind --to <target> --scope <scope>`` will change (no writes);
    ``survey`` also lists every edit made since the latest recorded state (one walk)."""
    return plan(session, checkpoint_target(target, scope, force=force), survey=survey)


def plan_undo(session: Session, ref: str | None = None, *, survey: bool = False) -> RewindPlan:
    """What ``tilth rewind --undo [<ref>]`` will change (no writes); ``survey`` as for a
    rewind (``plan``)."""
    return plan(session, undo_target(session, ref), survey=survey)


def plan_graft(parent: Session, spec: dict[str, Any], label: str) -> RewindPlan:
    """A go-back plan that only grafts (the winner of a task's attempts)."""
    return RewindPlan(
        op="graft",
        op_id=new_op_id(),
        session_id=parent.id,
        target=f"cp-{int(spec['start_seq']):04d}",
        target_label=label,
        scope="both",
        worktree=str(parent.workspace_dir),
        headline=f"graft {label} into session {parent.id}",
        steps=(Graft(spec),),
    )
