"""What each stage does: worker stages end in a submit tool, reviews in a verdict, verifying in
the full ratchet. ``run_stage`` returns a ``StageResult``; the pipeline applies it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tilth.agent import evaluator, prompts
from tilth.agent.case import (
    SUBMIT_CASE,
    SUBMIT_CASE_SCHEMA,
    arguments_of,
    fence,
    format_case,
    parse_case,
)
from tilth.agent.gate_outcome import gate_outcome, outcome_style
from tilth.agent.run_context import RunContext
from tilth.agent.seed_copies import seed_test_files
from tilth.agent.seed_tests import GateRun, clip, run_gate
from tilth.agent.task_state import TaskState
from tilth.agent.verdict import REVIEWED_STAGE, format_reject_feedback
from tilth.agent.worker import StageSpec, Submission
from tilth.agent.worker import run_stage as run_worker_stage
from tilth.config import secret_values
from tilth.model.base import ToolCall, function_tool
from tilth.session.events import payloads_of
from tilth.session.task import Task

SENDS_BACK_TO = REVIEWED_STAGE
"""A rejection returns the task to the stage that produced the rejected work."""
PREVIEW = 1_000


@dataclass(frozen=True)
class StageResult:
    """How a stage ended: passed with an output, or sent the task back with feedback."""

    passed: bool
    output: Any = None
    back_to: str | None = None
    feedback: str | None = None
    verdict: dict[str, Any] | None = None


SUBMIT_BRAINSTORM_SCHEMA = function_tool(
    "submit_brainstorm",
    "Finish the brainstorming stage with your design note (approach, alternatives, files, "
    "risks, how each acceptance criterion will be met). An independent reviewer reads it.",
    {"content": {"type": "string", "description": "The design note, in Markdown."}},
    ["content"],
)
SUBMIT_PLAN_SCHEMA = function_tool(
    "submit_plan",
    "Finish the planning stage with a concrete implementation plan: numbered steps, the files "
    "and symbols each changes, and how each acceptance criterion will be verified.",
    {"plan": {"type": "string", "description": "The plan, in Markdown."}},
    ["plan"],
)


# ---- worker stages --------------------------------------------------------------------------
def _text_submission(
    field: str, stage: str, next_step: str
) -> Callable[[ToolCall, int], Submission]:
    def handle(call: ToolCall, number: int) -> Submission:
        try:
            value = arguments_of(call).get(field)
        except ValueError as exc:
            return Submission(
                False, f"ERROR: {exc}. Call it again with {{{field}: str}}.", is_error=True
            )
        if not isinstance(value, str) or not value.strip():
            return Submission(
                False, f"ERROR: '{field}' must be a non-blank string. Call it again.", is_error=True
            )
        return Submission(
            True, f"Recorded; the {stage} stage is complete. {next_step}", value.strip()
        )

    return handle


def _case_handler(ctx: RunContext, task: Task) -> Callable[[ToolCall, int], Submission]:
    task_id = task.id

    def handle(call: ToolCall, number: int) -> Submission:
        case, error = parse_case([call])
        if case is None:
            ctx.session.log(
                "case_parse_error",
                task_id=task_id,
                stage="implementing",
                turn=number,
                error=error,
                arguments=call.arguments[:4_000],
            )
            return Submission(False, str(error), is_error=True)
        ctx.progress.note(f"  running the seed tests for {task_id} …", style="dim")
        gate = run_gate(
            ctx.worktree,
            [task_id],
            environment=ctx.project_env(),
            timeout=ctx.settings.test_timeout_seconds,
            secrets=secret_values(ctx.settings.env),
            seed_sha=ctx.seed_sha(),
            sandbox=ctx.sandbox,
        )
        log_gate(ctx, task_id, "implementing", gate, turn=number)
        ctx.progress.note(
            f"  seed tests for {task_id}: {gate_outcome(gate)}", style=outcome_style(gate)
        )
        if gate.tampered:
            return Submission(False, gate.report(), is_error=True)
        if not gate.passed:
            return Submission(
                False,
                "This task's acceptance tests fail, so the case cannot go to review yet.\n"
                "Read the output below, fix the cause, and call `submit_case` again once they "
                "pass.\n\n" + gate.report(),
                is_error=True,
            )
        return Submission(
            True,
            "This task's acceptance tests pass; your case goes to an independent code review.",
            {"case": case, "tests": gate.to_dict()},
        )

    return handle


def worker_spec(
    ctx: RunContext, task: Task, state: TaskState, stage: str, stages: tuple[str, ...]
) -> StageSpec:
    """The submit tool, handler and prompts of a worker stage."""
    if stage == "brainstorming":
        tool, schema = "submit_brainstorm", SUBMIT_BRAINSTORM_SCHEMA
        handler = _text_submission("content", stage, "It goes to design review next.")
    elif stage == "planning":
        tool, schema = "submit_plan", SUBMIT_PLAN_SCHEMA
        handler = _text_submission("plan", stage, "Implementation comes next.")
    else:
        tool, schema = SUBMIT_CASE, SUBMIT_CASE_SCHEMA
        handler = _case_handler(ctx, task)
    closing = f"Begin now. When the {stage} work is complete, call `{tool}`."

    def brief() -> str:
        session = ctx.session
        return prompts.worker_brief(
            task=task,
            prd=session.tasks(),
            stage=stage,
            stages=stages,
            outputs=state.outputs,
            ledger=session.ledger.read(task.id),
            context=prompts.context_files(ctx.worktree, ctx.settings.context_files),
            progress=prompts.progress_tail(session.progress_path),
            test_files=seed_test_files(ctx.worktree, [task.id]),
            closing=closing,
            attempt_note=ctx.attempt_note,
        )

    return StageSpec(stage, tool, schema, handler, lambda: prompts.worker_system(stage), brief)


# ---- the gate -------------------------------------------------------------------------------
def log_gate(
    ctx: RunContext, task_id: str, stage: str, gate: GateRun, *, turn: int | None = None
) -> None:
    """Log ``tests_run`` for one gate (and ``seed_tests_changed`` when it refused to run)."""
    if gate.tampered:
        ctx.session.log(
            "seed_tests_changed", task_id=task_id, stage=stage, turn=turn, files=gate.tampered
        )
    ctx.session.log(
        "tests_run",
        task_id=task_id,
        stage=stage,
        turn=turn,
        passed=gate.passed,
        files=gate.files,
        checks=[{"name": c.name, "passed": c.passed, "command": c.command} for c in gate.checks],
        output_preview=clip(gate.report(), PREVIEW),
    )


def gate_report(stored: Any) -> str:
    """A stored gate result (``GateRun.to_dict``) as the report the evaluator reads: each
    check's output capped, then fenced (the worker's code printed it)."""
    if not isinstance(stored, dict):
        return ""
    parts = []
    checks = stored.get("checks") or []
    each = prompts.GATE_OUTPUT_CAP // max(1, len(checks))
    for check in checks:
        status = "PASS" if check.get("passed") else "FAIL"
        output = fence(clip(str(check.get("output") or "(no output)"), each), "text")
        parts.append(f"[{check.get('name')}] {status}\n{output}")
    return "\n\n".join(parts)


def tampering_note(ctx: RunContext, task_id: str) -> str:
    """What the evaluator is told when the worker changed seed tests during this task."""
    files: dict[str, None] = {}
    for payload in payloads_of(ctx.session.events.path, "seed_tests_changed"):
        if payload.get("task_id") == task_id:
            files.update(dict.fromkeys(str(f) for f in payload.get("files") or []))
    if not files:
        return ""
    return (
        "[harness] NOTE: during this task the worker changed the seed test file(s) "
        f"{', '.join(files)}. The harness refused that case; the tests reported here are the "
        "seed commit's copies. Weigh this when judging the work."
    )


# ---- the stages -----------------------------------------------------------------------------
def run_stage(
    ctx: RunContext, task: Task, state: TaskState, stage: str, stages: tuple[str, ...]
) -> StageResult:
    """Run ``stage`` of ``task`` to its end."""
    if stage in ("brainstorming", "planning", "implementing"):
        spec = worker_spec(ctx, task, state, stage, stages)
        return StageResult(True, run_worker_stage(ctx, task, state, spec))
    if stage in SENDS_BACK_TO:
        return _review(ctx, task, state, stage, stages)
    if stage == "verifying":
        return _verify(ctx, task, state)
    raise ValueError(f"unknown stage {stage!r}")


def _review(
    ctx: RunContext, task: Task, state: TaskState, stage: str, stages: tuple[str, ...]
) -> StageResult:
    case: dict[str, Any] | None = None
    report = ""
    if stage == "design_review":
        note = str(state.outputs.get("brainstorming") or "")
        work = "### Design note (brainstorm)\n\n" + fence(note, "text")
    else:
        implemented = state.outputs.get("implementing")
        implemented = implemented if isinstance(implemented, dict) else {}
        case = implemented.get("case") if isinstance(implemented.get("case"), dict) else None
        work = format_case(case) if case else "(the worker left no case)"
        report = gate_report(implemented.get("tests"))
        report = "\n\n".join(x for x in (tampering_note(ctx, task.id), report) if x)
    verdict = evaluator.review(
        ctx, task, state, stage, stages, work=work, gate_report=report, case=case
    )
    if verdict.get("verdict") == "accept":
        return StageResult(True, verdict, verdict=verdict)
    return StageResult(
        False,
        back_to=SENDS_BACK_TO[stage],
        feedback=format_reject_feedback(verdict, stage),
        verdict=verdict,
    )


def _verify(ctx: RunContext, task: Task, state: TaskState) -> StageResult:
    task_id = task.id
    done = [t.id for t in ctx.session.tasks() if t.status == "done"]
    ids = [*[i for i in done if i != task_id], task_id]
    checks = "the seed tests of " + ", ".join(ids)
    if ctx.settings.lint_command:
        checks += " and the linter"
    ctx.progress.note(f"  verifying {task_id}: running {checks} …", style="dim")
    gate = run_gate(
        ctx.worktree,
        ids,
        environment=ctx.project_env(),
        timeout=ctx.settings.test_timeout_seconds,
        lint_command=ctx.settings.lint_command,
        secrets=secret_values(ctx.settings.env),
        seed_sha=ctx.seed_sha(),
        sandbox=ctx.sandbox,
    )
    log_gate(ctx, task_id, "verifying", gate)
    ctx.progress.note(f"  verifying {task_id}: {gate_outcome(gate)}", style=outcome_style(gate))
    if gate.passed:
        return StageResult(True, gate.to_dict())
    feedback = (
        "Verification failed after the review: the full check (the acceptance tests of every "
        "finished task plus this one"
        + (", and the linter" if ctx.settings.lint_command else "")
        + ") does not pass on the reviewed state. Fix the cause without breaking this task, "
        "then call `submit_case` again.\n\n" + gate.report()
    )
    return StageResult(False, gate.to_dict(), back_to="implementing", feedback=feedback)
