"""The evaluator: one fresh-context review per call, parsed strictly, recorded in the ledger.

It sees the task, its acceptance criteria, project context, earlier stage
outputs, its own earlier verdicts (the ledger), the work under review, the seed
tests, their output and the task's cumulative diff. A reply that cannot be
parsed gets one retry; a second failure is recorded as a rejection (fail closed).
"""

from __future__ import annotations

from typing import Any

from tilth import git
from tilth.agent import prompts
from tilth.agent.gate.seed_copies import seed_copies, seed_test_files
from tilth.agent.run_context import RunContext
from tilth.agent.stops import TaskFailed
from tilth.agent.task_state import TaskState
from tilth.agent.turn import Actor, answer, log_call, say, take_turn
from tilth.agent.verdict import (
    SUBMIT_VERDICT_SCHEMA,
    VERDICT_SCHEMA_VERSION,
    fallback_verdict,
    parse_verdict,
    verdict_summary,
)
from tilth.safe_read import try_read_text
from tilth.session.task import Task

ATTEMPTS = 2
SILENT_REVIEWS_LIMIT = 2
"""Reviews in a row without a usable verdict before the task stops (the evaluator's fault,
not the worker's: without it the task went back and forth until the worker's turn cap)."""
RAW_CALL_CAP = 4_000

SEED_TEST_READ_CAP = 1 << 20


def thread_key(task_id: str, stage: str, round_number: int) -> str:
    """The thread of one review round (each round starts from a fresh context)."""
    return f"evaluator.{task_id}.{stage}.{round_number}"


def contract(ctx: RunContext, task_id: str) -> dict[str, str]:
    """The task's seed tests as the seed commit has them (path → content).

    Never a listing of the worktree: a file the worker names ``test_t001_more.py`` is its
    own test, shown in the diff, not part of the contract.
    """
    seed = ctx.seed_sha()
    if seed is not None:
        return seed_copies(ctx.worktree, seed, [task_id]).tests
    found = {}
    for name in seed_test_files(ctx.worktree, [task_id]):  # a session from before seed commits
        text = try_read_text(ctx.worktree, name, SEED_TEST_READ_CAP)
        if text is not None:
            found[name] = text
    return found


def task_diff(ctx: RunContext, state: TaskState) -> tuple[str, str]:
    """The task's cumulative diff (committed and not) since its base commit, and its
    ``N file(s), +A -D`` summary."""
    diff, numstat = git.diff_and_numstat(ctx.worktree, state.base_commit or "HEAD")
    return diff, diff_summary(numstat)


def diff_summary(out: str) -> str:
    """``N file(s), +A -D`` from ``git diff --numstat``."""
    files = added = deleted = 0
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        files += 1
        added += int(parts[0]) if parts[0].isdigit() else 0
        deleted += int(parts[1]) if parts[1].isdigit() else 0
    if not files:
        return "empty diff"
    return f"{files} file(s), +{added} -{deleted}"


def review(
    ctx: RunContext,
    task: Task,
    state: TaskState,
    stage: str,
    stages: tuple[str, ...],
    *,
    work: str,
    gate_report: str = "",
    case: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run one review of ``work`` at ``stage``; log it, append it to the ledger, return it."""
    task_id = task.id
    ledger = ctx.session.ledger.read(task_id)
    round_number = len(ledger) + 1
    thread = ctx.session.threads.get(thread_key(task_id, stage, round_number))
    if thread.read():
        # A review interrupted mid-way is redone from a fresh context.
        thread.truncate_after(None)
    actor = Actor(
        session=ctx.session,
        name="evaluator",
        model=ctx.evaluator,
        thread=thread,
        control_schemas=[SUBMIT_VERDICT_SCHEMA],
        task_id=task_id,
        stage=stage,
        scripted=ctx.scripted,
        on_delta=ctx.on_delta,
        **ctx.turn_options(ctx.evaluator),
    )
    diff, summary = task_diff(ctx, state)  # the evaluator reads; the worktree stays as it is
    system = prompts.evaluator_system(stage)
    brief = prompts.evaluator_brief(
        task=task,
        stage=stage,
        stages=stages,
        outputs=state.outputs,
        ledger=ledger,
        context=prompts.context_files(ctx.worktree, ctx.settings.context_files, ctx.seed_sha()),
        work=work,
        seed_tests=prompts.seed_tests_text(contract(ctx, task_id)),
        gate_report=gate_report,
        diff=diff,
    )
    thread.append({"role": "system", "content": system}, turn=0)
    thread.append({"role": "user", "content": brief}, turn=0)
    # A review is the evaluator's turn ``round_number`` of this task, in every event and in
    # the checkpoint a rejection leaves; the worker's turn count is ``worker_turns``.
    ctx.session.log(
        "prompt_assembled",
        **actor.scope(),
        turn=round_number,
        round=round_number,
        role="evaluator",
        chars=len(system) + len(brief),
        content=brief[:16_000],
        truncated=len(brief) > 16_000,
    )
    verdict = _ask(ctx, actor, round_number)
    ctx.session.log(
        "evaluator_verdict",
        **actor.scope(),
        turn=round_number,
        round=round_number,
        worker_turns=state.turns,
        schema_version=VERDICT_SCHEMA_VERSION,
        **verdict,
    )
    ctx.session.ledger.append(
        task_id,
        {
            "stage": stage,
            "turn": state.turns,
            "diff_summary": summary,
            "case": case,
            "verdict": verdict,
        },
    )
    ctx.session.log(
        "ledger_appended",
        **actor.scope(),
        turn=round_number,
        round=round_number,
        worker_turns=state.turns,
        verdict_summary=verdict_summary(verdict),
    )
    ctx.progress.status(task=task_id, stage=stage, tokens=ctx.shown_tokens())
    silent = _silent_reviews([*ledger, {"verdict": verdict}])
    if silent >= SILENT_REVIEWS_LIMIT:
        raise TaskFailed(
            "evaluator_silent",
            f"the evaluator ({ctx.evaluator.name}) answered {silent} reviews in a row without a "
            "usable submit_verdict call; try a stronger TILTH_EVALUATOR_MODEL",
            reviews=silent,
        )
    return verdict


def _silent_reviews(ledger: list[dict[str, Any]]) -> int:
    """How many of the latest reviews in a row gave no usable verdict."""
    count = 0
    for entry in reversed(ledger):
        verdict = entry.get("verdict")
        if not (isinstance(verdict, dict) and verdict.get("parse_failed")):
            break
        count += 1
    return count


def _ask(ctx: RunContext, actor: Actor, turn: int) -> dict[str, Any]:
    """Call the evaluator, retrying once on an unparseable reply; fail closed after that."""
    error = ""
    for attempt in range(1, ATTEMPTS + 1):
        ctx.check_caps()
        result = take_turn(actor, turn, phase="evaluator", attempt=attempt)
        calls = result.control_calls
        for call in calls:
            log_call(actor, turn, call)
        verdict, error_text = parse_verdict(calls)
        if verdict is not None:
            for call in calls:
                answer(actor, turn, call, "Verdict recorded.")
            return verdict
        error = error_text or "unparseable reply"
        if not calls and result.unreadable_calls:
            # The turn answered the call already, with what was wrong with it.
            error = "the submit_verdict arguments could not be parsed (not valid JSON)"
        ctx.session.log(
            "evaluator_parse_error",
            **actor.scope(),
            turn=turn,
            attempt=attempt,
            error=error,
            raw_tool_calls=[
                {"name": call.name, "arguments": call.arguments[:RAW_CALL_CAP]}
                for call in result.turn.tool_calls
            ],
        )
        if calls:
            for call in calls:
                answer(actor, turn, call, error, is_error=True)
        elif attempt < ATTEMPTS and not result.unreadable_calls:
            say(actor, error, turn=turn, kind="parse_error")
    return fallback_verdict(error)
