"""``tilth restart``: restart a task, or a task from one of its completed stages.

A restart is a go-back to the checkpoint just before the target stage (or the
task's start), with two twists: uncommitted changes are stashed first, and the
task's status becomes ``pending``. When no checkpoint exists (an older session),
the commit is found from the ``stage_completed`` event, then from the commit
subject ``task/<T>: complete <stage> stage``, else the whole task restarts with
a warning. A commit no longer on the session branch (the user removed it by hand)
counts as not found: a restart never quietly puts it back. A restart forgets the
review counters of the stages it re-runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tilth import git
from tilth.errors import UsageError
from tilth.session.events import iter_lines, utc_now
from tilth.session.harness_state import HarnessState
from tilth.session.pipelines import STAGE_COMMIT, stages_for
from tilth.session.store import Session
from tilth.session.task import Task
from tilth.timeline.record.checkpoints import Checkpoint, read_timeline, resolve_checkpoint
from tilth.timeline.record.state_capture import read_harness_state, worktree_of
from tilth.timeline.rewind.plan import RewindError, RewindPlan
from tilth.timeline.rewind.planner import plan
from tilth.timeline.rewind.targets import CodeGoal, Target, checkpoint_target


@dataclass(frozen=True)
class StageTarget:
    """Where a restart goes: a checkpoint when one exists, else just a commit."""

    head: str
    checkpoint: Checkpoint | None
    from_stage: str
    warning: str | None = None


def stages_of(task: Task, default_tier: str) -> tuple[str, ...]:
    """The task's pipeline by its tier (or the default tier)."""
    return stages_for(task, default_tier)


def _task(session: Session, task_id: str) -> Task:
    tasks = session.tasks()
    for task in tasks:
        if task.id == task_id:
            return task
    known = ", ".join(t.id for t in tasks) or "none"
    raise UsageError(f"session {session.id} has no task {task_id} (tasks: {known})")


def _stage_commits(worktree: Path, task_id: str | None = None) -> dict[str, dict[str, str]]:
    """``task → stage → newest sha`` of the stage commits on the current branch (of one
    task, or of all of them from one walk)."""
    needle = f"task/{task_id}: complete " if task_id else ": complete "
    out = git.git("log", "--format=%H%x09%s", "-F", f"--grep={needle}", "HEAD", cwd=worktree)
    found: dict[str, dict[str, str]] = {}
    for line in out.splitlines():
        sha, _, subject = line.partition("\t")
        named = STAGE_COMMIT.fullmatch(subject)
        if named and (task_id is None or named["task"] == task_id):
            found.setdefault(named["task"], {}).setdefault(named["stage"], sha)
    return found


def _stage_event_sha(session: Session, task_id: str, stage: str) -> str | None:
    """The sha of the newest ``stage_completed`` event for (task, stage) (a full scan)."""
    sha = None
    needle = b'"stage_completed"'
    for line, _, _, complete in iter_lines(session.events.path):
        if not complete or needle not in line:
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        payload = record.get("payload") if isinstance(record, dict) else None
        if (
            isinstance(payload, dict)
            and record.get("type") == "stage_completed"
            and payload.get("task_id") == task_id
            and payload.get("stage") == stage
            and payload.get("sha")
        ):
            sha = str(payload["sha"])
    return sha


def completed_stages(
    session: Session, task_id: str, stages: tuple[str, ...], worktree: Path
) -> list[str]:
    """Stages of the task that have completed: a stage checkpoint or a stage commit."""
    done = completed_stages_by_task(session, worktree).get(task_id, set())
    return [s for s in stages if s in done]


def _unread(session: Session) -> list[Checkpoint]:
    """The checkpoints with their states not read (``resolve_checkpoint`` reads the chosen
    one): one whose state blob is lost is then never stepped over."""
    return read_timeline(session, resolve=False).checkpoints


def completed_stages_by_task(session: Session, worktree: Path) -> dict[str, set[str]]:
    """``completed_stages`` of every task at once: one read of the checkpoints, one git walk."""
    done: dict[str, set[str]] = {}
    for c in _unread(session):
        if c.kind == "stage" and c.task_id and c.stage:
            done.setdefault(c.task_id, set()).add(c.stage)
    for task_id, stages in _stage_commits(worktree).items():
        done.setdefault(task_id, set()).update(stages)
    return done


def _base(session: Session, task_id: str, worktree: Path) -> StageTarget:
    starts = [c for c in _unread(session) if c.kind == "task_start" and c.task_id == task_id]
    if starts:
        start = resolve_checkpoint(session, starts[0].id)  # a lost state: an error, named
        return StageTarget(start.head, start, "", _off_branch(start.head, worktree))
    state = read_harness_state(session).tasks.get(task_id)
    base = state.get("base_commit") if isinstance(state, dict) else None
    if isinstance(base, str) and git.rev_parse(base, worktree):
        return StageTarget(base, None, "", _off_branch(base, worktree))
    raise RewindError(
        f"cannot find where task {task_id} started (no task_start checkpoint and no "
        f"base_commit in tasks/{task_id}.json)",
        hint="`tilth checkpoints` shows what exists; `tilth rewind --to <cp>` can go back by hand",
    )


def _off_branch(base: str, worktree: Path) -> str | None:
    """A warning when the task's start is no longer on the branch: going back there puts
    back commits that were removed from it by hand."""
    if git.is_ancestor(base, "HEAD", worktree):
        return None
    return (
        f"the task's start {base[:12]} is no longer on the session branch: commits "
        "removed from it by hand come back"
    )


def find_target(
    session: Session, task_id: str, from_stage: str | None, default_tier: str
) -> StageTarget:
    """Resolve ``--from`` to the commit (and checkpoint) the restart returns to."""
    task = _task(session, task_id)
    stages = stages_of(task, default_tier)
    worktree = worktree_of(session)
    if from_stage is None or from_stage == stages[0]:
        return _with_stage(_base(session, task_id, worktree), stages[0])
    completed = completed_stages(session, task_id, stages, worktree)
    if from_stage not in completed:
        valid = [stages[0], *[s for s in completed if s != stages[0]]]
        why = "is not a stage of its tier" if from_stage not in stages else "has not completed"
        raise UsageError(
            f"cannot restart {task_id} from {from_stage!r}: it {why}",
            hint=f"valid --from stages for {task_id}: {', '.join(valid)} "
            "(without --from the whole task restarts)",
        )
    previous = stages[stages.index(from_stage) - 1]
    found = [
        c
        for c in _unread(session)
        if c.kind == "stage"
        and c.task_id == task_id
        and c.stage == previous
        and on_branch(c.head, worktree)
    ]
    if found:
        return StageTarget(found[-1].head, resolve_checkpoint(session, found[-1].id), from_stage)
    sha = _stage_event_sha(session, task_id, previous)
    if sha is None or not on_branch(sha, worktree):
        sha = _stage_commits(worktree, task_id).get(task_id, {}).get(previous)
    if sha is not None:
        return StageTarget(sha, None, from_stage)
    base = _base(session, task_id, worktree)
    gone = "is no longer on the session branch (removed by hand)"
    if not _reachable(session, task_id, previous, worktree):
        gone = "was not found"
    warning = f"the commit of stage {previous} {gone}; restarting the whole task"
    return StageTarget(
        base.head,
        base.checkpoint,
        stages[0],
        warning="; ".join(w for w in (warning, base.warning) if w),
    )


def on_branch(sha: str, worktree: Path) -> bool:
    """True when ``sha`` exists and is on the worktree's branch: a commit the user removed
    from the branch by hand counts as not found, so a restart never quietly puts it back."""
    return git.rev_parse(sha, worktree) is not None and git.is_ancestor(sha, "HEAD", worktree)


def _reachable(session: Session, task_id: str, stage: str, worktree: Path) -> bool:
    """True when a recorded commit of (task, stage) still exists, though off the branch."""
    recorded = [
        c.head
        for c in _unread(session)
        if c.kind == "stage" and c.task_id == task_id and c.stage == stage
    ]
    sha = _stage_event_sha(session, task_id, stage)
    return any(git.rev_parse(s, worktree) for s in [*recorded, *([sha] if sha else [])])


def _with_stage(target: StageTarget, stage: str) -> StageTarget:
    return StageTarget(target.head, target.checkpoint, stage, target.warning)


def _prune_stages(value: Any, dropped: set[str]) -> Any:
    """Remove the dropped stages from any stage-keyed dict or stage-name list, recursively."""
    if isinstance(value, dict):
        return {k: _prune_stages(v, dropped) for k, v in value.items() if k not in dropped}
    if isinstance(value, list):
        return [
            _prune_stages(v, dropped) for v in value if not (isinstance(v, str) and v in dropped)
        ]
    return value


def _fallback_state(
    session: Session, task_id: str, stages: tuple[str, ...], from_stage: str
) -> HarnessState:
    """Harness state when no checkpoint exists: this and later tasks cleared by hand."""
    state = read_harness_state(session)
    prd = state.prd or ()
    ids = [t.id for t in prd]
    later = set(ids[ids.index(task_id) + 1 :]) if task_id in ids else set()
    if state.prd is not None:
        state = state.with_prd(tuple(t.with_status("pending") if t.id in later else t for t in prd))
    tasks = {k: v for k, v in state.tasks.items() if k not in later}
    if from_stage == stages[0]:
        tasks.pop(task_id, None)
    elif task_id in tasks:
        dropped = set(stages[stages.index(from_stage) :])
        tasks[task_id] = _prune_stages(tasks[task_id], dropped)
    state = state.with_tasks(tasks)
    state = state.with_ledger({k: v for k, v in state.ledger.items() if k not in later})
    if state.status in ("all_done", "failed", "prepared"):
        state = state.with_status("running")
    return state


REVIEW_STAGES = ("design_review", "code_review")
"""Stages whose rejections count toward the evaluator cap."""


def reset_review_counters(task_state: dict[str, Any], rerun: tuple[str, ...]) -> list[str]:
    """Forget the review counters of the stages that re-run (the fifth seed); the stages
    whose counters were not zero are returned, for the plan."""
    stored = task_state.get("review_rejections")
    by_stage = {
        str(k): v
        for k, v in (stored.items() if isinstance(stored, dict) else ())
        if isinstance(v, int) and not isinstance(v, bool)
    }
    total = task_state.get("rejections")
    total = total if isinstance(total, int) and not isinstance(total, bool) else 0
    # Rejections recorded before the per-stage split belong to no stage: a re-run review
    # stage takes them with it.
    unattributed = max(0, total - sum(by_stage.values()))
    reviews_rerun = [s for s in rerun if s in REVIEW_STAGES]
    reset = [s for s in reviews_rerun if by_stage.get(s)]
    if unattributed and reviews_rerun:
        reset = reset or reviews_rerun[:1]
        unattributed = 0
    kept = {k: v for k, v in by_stage.items() if k not in rerun}
    task_state["review_rejections"] = kept
    task_state["rejections"] = sum(kept.values()) + unattributed
    if "verifying" in rerun and task_state.get("verify_failures"):
        task_state["verify_failures"] = 0
        reset.append("verifying")
    return reset


def restart_target(
    session: Session, task_id: str, from_stage: str | None, default_tier: str
) -> Target:
    """Restarting ``task_id`` (from ``from_stage``) as a target: the checkpoint before the
    stage, uncommitted changes stashed, the task pending."""
    task = _task(session, task_id)
    stages = stages_of(task, default_tier)
    found = find_target(session, task_id, from_stage, default_tier)
    if found.checkpoint is not None:
        target = checkpoint_target(found.checkpoint, "both", op="restart")
        state = HarnessState.from_dict(target.history.state or {})
        warnings = list(target.warnings)
    else:
        target = Target(
            op="restart",
            ref=found.head[:12],
            label=f"commit {found.head[:12]}",
            scope="both",
            headline="",
            code=CodeGoal(found.head),
        )
        state = _fallback_state(session, task_id, stages, found.from_stage)
        warnings = ["no checkpoint for this point: conversation threads and the event log are kept"]
    if state.prd is not None:
        state = state.with_prd(
            tuple(t.with_status("pending") if t.id == task_id else t for t in state.prd)
        )
    if found.warning:
        warnings.insert(0, found.warning)
    whole = found.from_stage == stages[0]
    rerun = stages[stages.index(found.from_stage) :]
    details = [f"stages that will re-run: {' -> '.join(rerun)}"]
    task_state = json.loads(json.dumps(state.tasks.get(task_id)))
    if isinstance(task_state, dict):
        reset = reset_review_counters(task_state, rerun)
        state = state.with_tasks({**state.tasks, task_id: task_state})
        if reset:
            details.append(f"review counters reset: {', '.join(reset)}")
    assert target.code is not None
    return replace(
        target,
        code=replace(target.code, stash_message=f"tilth restart {task_id} {utc_now()}"),
        history=replace(target.history, state=state.to_dict()),
        headline=f"restart {task_id} of session {session.id}"
        + ("" if whole else f" from {found.from_stage}")
        + f" (back to {found.head[:12]})",
        details=tuple(details),
        warnings=tuple(warnings),
        event={
            "type": "restart",
            "payload": {
                "task_id": task_id,
                "from": found.from_stage,
                "to": target.ref,
                "head": found.head,
            },
        },
    )


def plan_restart(
    session: Session, task_id: str, from_stage: str | None, default_tier: str
) -> RewindPlan:
    """What ``tilth restart <task> [--from <stage>]`` will change (no writes)."""
    result = plan(session, restart_target(session, task_id, from_stage, default_tier))
    ref = git.stash_ref(session.id)
    stash_line = (
        f"{len(result.conflicts)} file(s) will be saved on {ref} (your own `git stash` is not "
        f"touched); get them back with: git -C {result.worktree} cherry-pick --no-commit {ref}"
        if result.conflicts
        else "none (nothing to stash)"
    )
    result.details += [
        f"commits rolled back: {len(result.commits_dropped)}",
        f"uncommitted changes: {stash_line}",
        f"{task_id} becomes pending; nothing runs until `tilth resume {session.id}`",
    ]
    return result
