"""One task's stage pipeline, from wherever its ``TaskState`` says it stands.

The next stage is always the first of the tier's stages not yet done, so a stop,
a resume, a rewind or a restart needs nothing but the state file. Each completed
stage is a commit ``task/<T-NNN>: complete <stage> stage``; a rejection removes the
rejected stage (and everything after it) from the done list and leaves feedback
for it. Marking the task done or failed is the outer loop's job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from tilth import git
from tilth.agent.branch_guard import require_session_branch
from tilth.agent.run_context import RunContext
from tilth.agent.stages import StageResult, run_stage
from tilth.agent.stops import FailureReason, TaskFailed
from tilth.agent.task_state import TaskState
from tilth.agent.verdict import rejection_line, verdict_summary
from tilth.agent.worker import mark_stage_done
from tilth.session.pipelines import stage_commit_message, stages_for
from tilth.session.store import Session
from tilth.session.task import Task


@dataclass
class TaskOutcome:
    """How ``run_task`` ended."""

    status: Literal["done", "failed"]
    reason: FailureReason | None = None
    """failed: iter_cap, evaluator_cap, verify_cap, empty_responses or no_case."""
    summary: str = ""
    fields: dict[str, Any] = field(default_factory=dict)
    """failed: the reason's own figures (streak, nudges, evaluator_calls, turns)."""


def next_stage(stages: tuple[str, ...], done: list[str]) -> str | None:
    """The first stage of the pipeline not yet done."""
    return next((stage for stage in stages if stage not in done), None)


def begin_task(ctx: RunContext, task: Task, state: TaskState) -> object | None:
    """Mark ``task`` in progress: a retried one gets fresh budgets (progress kept); one never
    started logs ``task_start`` and records its checkpoint, which is returned (else None)."""
    task_id = task.id
    set_task_status(ctx.session, task_id, "in_progress")
    if state.failure:
        ctx.session.log("task_retry", task_id=task_id, previous_failure=state.failure)
        state.failure, state.turns, state.rejections = None, 0, 0
        state.review_rejections = {}
        state.verify_failures = 0
        state.save(ctx.session)
    if state.base_commit is not None:
        return None
    state.base_commit = git.head(ctx.worktree)
    state.save(ctx.session)
    ctx.session.log(
        "task_start",
        task_id=task_id,
        title=task.title,
        tier=(task.tier or ctx.settings.default_tier).upper(),
        stages=list(stages_for(task, ctx.settings.default_tier)),
        base_commit=state.base_commit,
    )
    recorded: object | None = ctx.recorder.task_start(task_id)
    return recorded


def run_task(ctx: RunContext, task: Task) -> TaskOutcome:
    """Run ``task``'s remaining stages; may raise ``StopRun``, ``ModelError``, Ctrl-C."""
    task_id = task.id
    stages = stages_for(task, ctx.settings.default_tier)
    state = TaskState.load(ctx.session, task_id)
    begin_task(ctx, task, state)
    _commit_finished_stages(ctx, state)
    stage: str | None = None
    try:
        while (stage := next_stage(stages, state.stages_done)) is not None:
            _start_stage(ctx, state, stage)
            result = run_stage(ctx, task, state, stage, stages)
            if result.passed:
                _complete_stage(ctx, state, stage, result.output)
            else:
                _send_back(ctx, state, stage, stages, result)
    except TaskFailed as failed:
        state.failure = failed.reason
        state.save(ctx.session)
        ctx.session.log(
            "task_attempt_failed",
            task_id=task_id,
            stage=stage,
            reason=failed.reason,
            detail=failed.detail,
            **failed.fields,
        )
        return TaskOutcome("failed", failed.reason, failed.detail, dict(failed.fields))
    return TaskOutcome("done", summary=_summary(state))


def set_task_status(session: Session, task_id: str, status: str) -> None:
    """Set ``task_id``'s status in ``prd.json`` (written only when it changes)."""
    tasks = session.tasks()
    changed = [t.with_status(status) if t.id == task_id else t for t in tasks]
    if changed != tasks:
        session.save_tasks(changed)


def _start_stage(ctx: RunContext, state: TaskState, stage: str) -> None:
    resumed = state.current_stage == stage
    if not resumed:
        state.current_stage = stage
        state.save(ctx.session)
    ctx.session.log("stage_started", task_id=state.task_id, stage=stage, resumed=resumed)
    ctx.progress.status(task=state.task_id, stage=stage, tokens=ctx.shown_tokens())


def _complete_stage(ctx: RunContext, state: TaskState, stage: str, output: Any) -> None:
    """Record the output, then commit (a crash in between is finished on the next start)."""
    mark_stage_done(state, stage, output)
    state.save(ctx.session)
    _commit_finished_stages(ctx, state)


def _commit_finished_stages(ctx: RunContext, state: TaskState) -> None:
    """Commit every done stage that has no commit yet; log and checkpoint each."""
    for stage in state.stages_done:
        if stage in state.stage_commits:
            continue
        require_session_branch(ctx.worktree, ctx.session.branch, ctx.session.id)
        sha = git.commit_all(
            ctx.worktree, stage_commit_message(state.task_id, stage), allow_empty=True
        )
        state.stage_commits[stage] = sha or git.head(ctx.worktree)
        state.save(ctx.session)
        ctx.session.log(
            "stage_completed", task_id=state.task_id, stage=stage, sha=state.stage_commits[stage]
        )
        ctx.recorder.stage(state.task_id, stage)
        ctx.progress.note(f"  {state.task_id} {stage} ✓")


def _send_back(
    ctx: RunContext, state: TaskState, stage: str, stages: tuple[str, ...], result: StageResult
) -> None:
    """Return the task to ``result.back_to``; fail it when the evaluator cap is reached."""
    back_to = result.back_to or stage
    dropped = stages[stages.index(back_to) :]
    state.stages_done = [s for s in state.stages_done if s not in dropped]
    for name in dropped:
        state.stage_commits.pop(name, None)
        state.outputs.pop(name, None)
    state.feedback = result.feedback
    state.current_stage = None  # re-entering back_to is a new pass, not a resumed one
    if result.verdict is not None:
        state.rejections += 1
        state.review_rejections[stage] = state.review_rejections.get(stage, 0) + 1
    elif stage == "verifying":
        state.verify_failures += 1
    state.save(ctx.session)
    ctx.session.log(
        "stage_rejected",
        task_id=state.task_id,
        stage=stage,
        back_to=back_to,
        rejections=state.rejections,
        verdict_summary=verdict_summary(result.verdict) if result.verdict else "checks_failed",
    )
    if result.verdict is not None:
        ctx.recorder.turn(
            "evaluator",
            task_id=state.task_id,
            stage=stage,
            turn=ctx.session.ledger.count(state.task_id),
            label=f"{stage}: {verdict_summary(result.verdict)} → back to {back_to}",
        )
    why = f": {rejection_line(result.verdict)}" if result.verdict is not None else ""
    ctx.progress.note(f"  {state.task_id} {stage} sent the task back to {back_to}{why}")
    verify_cap = ctx.settings.max_verify_failures_per_task
    if stage == "verifying" and verify_cap and state.verify_failures >= verify_cap:
        # Without this a task whose checks never pass loops for ever when the turn cap is off.
        raise TaskFailed(
            "verify_cap",
            f"verifying failed {state.verify_failures} time(s) "
            f"[TILTH_MAX_VERIFY_FAILURES_PER_TASK={verify_cap}]",
            verify_failures=state.verify_failures,
        )
    cap = ctx.settings.max_evaluator_calls_per_task
    if result.verdict is not None and cap and state.rejections >= cap:
        raise TaskFailed(
            "evaluator_cap",
            f"{state.rejections} rejection(s) [TILTH_MAX_EVALUATOR_CALLS_PER_TASK={cap}]",
            evaluator_calls=state.rejections,
        )


def _summary(state: TaskState) -> str:
    implemented = state.outputs.get("implementing")
    if isinstance(implemented, dict) and isinstance(implemented.get("case"), dict):
        return str(implemented["case"].get("summary", ""))
    return ""
