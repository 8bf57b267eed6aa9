"""The worker loop of one stage: tool-using turns until the stage's submit tool is accepted.

Each stage has its own persisted thread (``worker.<T-NNN>.<stage>``), so a stage
stopped mid-way continues from its last completed turn. Robustness carried over
from the original and fixed where it broke: empty responses back off and are not
added to the thread; a turn without any tool call is nudged; malformed arguments
are answered, never raised; every call in a turn is answered before the next.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from time import sleep
from typing import Any, NoReturn

from tilth.agent.cut_turn import cut_turn, settle
from tilth.agent.repeats import RepeatedFailure, guard_for
from tilth.agent.run_context import RunContext
from tilth.agent.stops import TaskFailed
from tilth.agent.task_state import TaskState
from tilth.agent.turn import PREVIEW_CHARS, Actor, TurnResult, answer, log_call, say, take_turn
from tilth.config import secret_values
from tilth.model.base import ToolCall
from tilth.session.task import Task
from tilth.tools import WORKER_TOOL_NAMES, ToolBox

EMPTY_RESPONSE_LIMIT = 3
QUIET_TURN_LIMIT = 3
NUDGE = (
    "You stopped without calling a tool. A reply without a tool call does not finish the "
    "stage: when the stage's work is complete, call `{tool}`. If it is not complete, keep "
    "working with the other tools."
)
RESUMED = (
    "The harness stopped and has now resumed this stage. Check the workspace state and "
    "continue; when the stage's work is complete, call `{tool}`."
)
DUPLICATE = "Duplicate `{tool}` call ignored; act on the response to the first one."


@dataclass(frozen=True)
class Submission:
    """What a stage made of one call of its submit tool."""

    accepted: bool
    reply: str
    """The text answered to the call."""
    output: Any = None
    """The stage output, when accepted."""
    is_error: bool = False


Handler = Callable[[ToolCall, int], Submission]
"""Judges one submit call (with the turn number); may run tests, never raises for the model."""


@dataclass(frozen=True)
class StageSpec:
    """A worker stage: its submit tool, how to judge a submission, how to open its thread."""

    stage: str
    tool: str
    schema: dict[str, Any]
    handler: Handler
    system: Callable[[], str]
    brief: Callable[[], str]


def mark_stage_done(state: TaskState, stage: str, output: Any) -> None:
    """Record ``stage`` as done with ``output``; its commit is still to be made."""
    state.outputs[stage] = output
    if stage not in state.stages_done:
        state.stages_done.append(stage)
    state.stage_commits.pop(stage, None)


def thread_key(task_id: str, stage: str) -> str:
    """The persisted thread of ``stage`` of ``task_id``."""
    return f"worker.{task_id}.{stage}"


def make_toolbox(ctx: RunContext) -> ToolBox:
    """The worker's tools, confined to the worktree, with API keys scrubbed."""
    return ToolBox(
        ctx.worktree,
        WORKER_TOOL_NAMES,
        observer=ctx.recorder.observer,
        secrets=secret_values(ctx.settings.env),
        environment=ctx.project_env(),
        sandbox=ctx.sandbox,
        remove_pipes=True,
    )


def open_thread(ctx: RunContext, actor: Actor, spec: StageSpec, state: TaskState) -> None:
    """Start the stage's thread, or repair and continue the persisted one."""
    thread = actor.thread
    messages = thread.messages()
    if len(messages) == 1:
        # A stop between the system prompt and the brief: without the brief the worker
        # would not know its task, so the thread is opened afresh.
        thread.truncate_after(None)
        messages = []
    if not messages:
        system, brief = spec.system(), spec.brief()
        thread.append({"role": "system", "content": system}, turn=state.turns)
        thread.append({"role": "user", "content": brief}, turn=state.turns)
        ctx.session.log(
            "prompt_assembled",
            **actor.scope(),
            turn=state.turns,
            role="worker",
            chars=len(system) + len(brief),
            content=brief[:16_000],
            truncated=len(brief) > 16_000,
        )
    else:
        # A stop between a model reply and its tool results leaves calls unanswered: the
        # turn is finished first (``cut_turn``), and counts as taken.
        cut = cut_turn(thread.read())
        if cut.calls:
            state.feedback = settle(actor, cut, spec.tool, state.feedback)
            state.turns = max(state.turns, cut.number or 0)
            state.save(ctx.session)
            # A turn like any other, now finished: its own checkpoint, so going back to it
            # brings its calls' effects without the next turn's.
            names = _shown([call.name for call in cut.calls])
            ctx.recorder.turn(
                "worker",
                task_id=actor.task_id,
                stage=spec.stage,
                turn=state.turns,
                label=f"{spec.stage}: {names} (finished on resume)",
            )
        elif not state.feedback and messages[-1].get("role") == "assistant":
            # Providers differ on a thread that ends with the assistant; give it a turn.
            say(actor, RESUMED.format(tool=spec.tool), turn=state.turns, kind="resumed")
    if state.feedback:
        say(actor, state.feedback, turn=state.turns, kind="feedback")
        ctx.session.log(
            "feedback_delivered",
            **actor.scope(),
            chars=len(state.feedback),
            preview=state.feedback[:PREVIEW_CHARS],
        )
        state.feedback = None
    state.save(ctx.session)


def run_stage(ctx: RunContext, task: Task, state: TaskState, spec: StageSpec) -> Any:
    """Take worker turns until ``spec``'s submit tool is accepted; returns the stage output.

    Raises ``TaskFailed`` (iter_cap, empty_responses, no_case, repeated_calls) and lets ``StopRun``,
    ``ModelError`` and ``KeyboardInterrupt`` through; all progress is persisted per turn.
    """
    task_id = task.id

    def checkpoint(label: str) -> str | None:
        found = ctx.recorder.turn(
            "worker", task_id=task_id, stage=spec.stage, turn=state.turns, label=label
        )
        return getattr(found, "id", None)

    actor = Actor(
        session=ctx.session,
        name="worker",
        model=ctx.worker,
        thread=ctx.session.threads.get(thread_key(task_id, spec.stage)),
        toolbox=make_toolbox(ctx),
        control_schemas=[spec.schema],
        task_id=task_id,
        stage=spec.stage,
        scripted=ctx.scripted,
        on_delta=ctx.on_delta,
        repeats=guard_for(ctx.settings.max_repeated_failures),
        **ctx.turn_options(ctx.worker, checkpoint),
    )
    open_thread(ctx, actor, spec, state)
    streaks = _Streaks()
    while True:
        limit = ctx.settings.max_iterations_per_task
        if limit and state.turns >= limit:
            raise TaskFailed(
                "iter_cap",
                f"{state.turns} worker turns without finishing [TILTH_MAX_ITERATIONS_PER_TASK]",
                turns=state.turns,
            )
        ctx.check_caps()
        number = state.turns + 1
        try:
            result = take_turn(actor, number)
        except RepeatedFailure as stuck:
            _stuck(ctx, task_id, spec, state, number, stuck)
        state.turns = number
        state.save(ctx.session)
        accepted, label = _after_turn(ctx, actor, spec, result, streaks)
        if accepted is not None:
            # Done before the turn checkpoint, so going back to this turn never replays
            # an accepted submission; the pipeline commits the stage right after.
            mark_stage_done(state, spec.stage, accepted.output)
            state.save(ctx.session)
        ctx.recorder.turn("worker", task_id=task_id, stage=spec.stage, turn=number, label=label)
        ctx.progress.status(task=task_id, stage=spec.stage, turn=number, tokens=ctx.shown_tokens())
        if accepted is not None:
            return accepted.output
        streaks.check(spec.tool)
        if streaks.empty:
            sleep(ctx.settings.empty_backoff_seconds * streaks.empty)


def _stuck(
    ctx: RunContext,
    task_id: str,
    spec: StageSpec,
    state: TaskState,
    number: int,
    stuck: RepeatedFailure,
) -> NoReturn:
    """End the task: the worker kept making the same failing call (the turn is recorded)."""
    state.turns = number
    state.save(ctx.session)
    label = f"{spec.stage}: stopped, {stuck.tool} failed {stuck.count} times the same way"
    ctx.recorder.turn("worker", task_id=task_id, stage=spec.stage, turn=number, label=label)
    raise TaskFailed("repeated_calls", stuck.detail, tool=stuck.tool, count=stuck.count)


@dataclass
class _Streaks:
    """Consecutive empty and tool-less turns in this stage."""

    empty: int = 0
    quiet: int = 0

    def check(self, tool: str) -> None:
        """Raise ``TaskFailed`` when a streak reached its limit."""
        if self.empty >= EMPTY_RESPONSE_LIMIT:
            raise TaskFailed(
                "empty_responses", f"{self.empty} empty model responses in a row", streak=self.empty
            )
        if self.quiet >= QUIET_TURN_LIMIT:
            raise TaskFailed(
                "no_case",
                f"{self.quiet} turns in a row without a tool call or `{tool}`",
                nudges=self.quiet - 1,
            )


def _after_turn(
    ctx: RunContext, actor: Actor, spec: StageSpec, result: TurnResult, streaks: _Streaks
) -> tuple[Submission | None, str]:
    """Classify a finished turn: submit calls judged, quiet turns nudged, empties logged."""
    if result.empty:
        streaks.empty += 1
        ctx.session.log(
            "empty_model_response",
            **actor.scope(),
            turn=result.number,
            streak=streaks.empty,
            finish_reason=result.turn.finish_reason,
        )
        return None, f"{spec.stage}: empty response"
    streaks.empty = 0
    accepted: Submission | None = None
    if result.control_calls:
        streaks.quiet = 0
        accepted = _submit(actor, spec, result)
    elif result.tool_calls_run == 0 and not result.unreadable_calls:
        streaks.quiet += 1
        if streaks.quiet < QUIET_TURN_LIMIT:
            say(actor, NUDGE.format(tool=spec.tool), turn=result.number, kind="nudge")
            ctx.session.log("nudge", **actor.scope(), turn=result.number, streak=streaks.quiet)
    else:
        streaks.quiet = 0
    return accepted, _label(spec, result, accepted)


def _submit(actor: Actor, spec: StageSpec, result: TurnResult) -> Submission | None:
    """Answer every control call of the turn; the accepted submission, if any.

    The calls are judged after the turn's other calls ran, so each meets the same worktree:
    one that repeats a call already judged (a small model sends the same ``submit_case``
    six times in one reply) is answered as a duplicate, not judged again, so a failing gate
    runs once and counts once (an attempt's failed gates are what best of N compares)."""
    accepted: Submission | None = None
    judged: set[str] = set()
    for call in result.control_calls:
        log_call(actor, result.number, call)  # the stage's own tool: the turn answered others
        if accepted is not None or call.arguments in judged:
            answer(actor, result.number, call, DUPLICATE.format(tool=spec.tool))
            continue
        judged.add(call.arguments)
        submission = spec.handler(call, result.number)
        answer(actor, result.number, call, submission.reply, is_error=submission.is_error)
        if submission.accepted:
            accepted = submission
    return accepted


def _label(spec: StageSpec, result: TurnResult, accepted: Submission | None) -> str:
    names = [call.name for call in result.turn.tool_calls]
    if accepted is not None:
        return f"{spec.stage}: {spec.tool} accepted"
    if not names:
        return f"{spec.stage}: no tool call"
    return f"{spec.stage}: {_shown(names)}"


def _shown(names: list[str]) -> str:
    """A turn's tool names for its checkpoint's label (the first four)."""
    return ", ".join(names[:4]) + (" …" if len(names) > 4 else "")
