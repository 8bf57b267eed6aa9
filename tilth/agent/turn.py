"""One tool-using turn, the same for every actor: worker, evaluator, interviewer, chat.

``take_turn`` keeps the thread within the model's context window (``Actor.context``),
asks the model (``tilth.model.call.ask``: cancellable, bounded by the actor's deadline,
cut short when it only repeats itself), logs ``model_call`` and every ``model_retry``,
tells the user and the model when the reply hit the reply-length limit, appends the
assistant message with every tool call's arguments as valid JSON (a server that
refuses a history holding invalid arguments would otherwise refuse every later
request), answers the calls it cannot read, runs every call the ``ToolBox`` knows
(logging ``tool_call`` and ``tool_result``) and hands back the calls it does not know
(the actor's control tools: ``submit_case``, ``ask_user``, ``write_seed``...). The
caller must ``answer`` each of those before the next turn — providers reject a thread
with an unanswered tool call (a turn cancelled between its calls answers them itself).
With a ``RepeatGuard`` (``agent.repeats``), a failing call the model keeps repeating
with no new successful call in between is answered with a warning, then the turn stops
(``RepeatedFailure``, raised once every call of the reply is answered).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from tilth.agent.arguments import unreadable_calls, valid_history, with_valid_arguments
from tilth.agent.repeats import RepeatGuard
from tilth.agent.stops import StopRun
from tilth.errors import ContextOverflow
from tilth.model.base import AssistantTurn, Model, OnDelta, ToolCall
from tilth.model.call import REPETITION, Cancelled, CancelToken, DeadlineReached, ask
from tilth.session.store import Session
from tilth.session.threads import Thread

if TYPE_CHECKING:
    from tilth.tools import ToolBox
    from tilth.tools.base import ToolOutcome

PREVIEW_CHARS = 500
CANCELLED = "ERROR: not run: cancelled by the person"
CUT_OFF_NOTICE = "the reply hit the reply-length limit"
Notice = Callable[[str, str], None]
"""``(kind, text)``: a one-line notice for the person (``retry``, ``cut_off``, ``compacted``…)."""


class ContextGuard(Protocol):
    """Keeps an actor's thread within its model's context window (``agent.context``'s
    ``ContextKeeper``): asked before each request and once after the server refused one."""

    def before_request(self, actor: Actor, tools: list[dict[str, Any]]) -> None: ...

    def after_overflow(
        self, actor: Actor, overflow: ContextOverflow, tools: list[dict[str, Any]]
    ) -> bool: ...

    def observe(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], prompt_tokens: int
    ) -> None: ...


@dataclass
class Actor:
    """Who is talking, to which model, in which thread, with which tools."""

    session: Session
    name: str
    """interviewer, worker, evaluator, planner, summarizer or chat."""
    model: Model
    thread: Thread
    toolbox: ToolBox | None = None
    control_schemas: list[dict[str, Any]] = field(default_factory=list)
    task_id: str | None = None
    stage: str | None = None
    scripted: bool = False
    on_delta: OnDelta | None = None
    """Shown each piece of a reply as it streams (a live token count), when set."""
    on_notice: Notice | None = None
    """Told what the person should know: a retry, a cut-off reply, a summarized thread."""
    cancel: CancelToken | None = None
    """Set by the person (Ctrl-C, a stop button): the turn ends at the next safe point."""
    deadline: float | None = None
    """A ``time.monotonic()`` instant: a reply still streaming then is cancelled (wall clock)."""
    run_tool: Callable[[ToolCall], ToolOutcome] | None = None
    """Runs one toolbox call (default: ``toolbox.dispatch``); the chat shows each as it runs."""
    context: ContextGuard | None = None
    """Keeps the thread within the model's context window (None: never summarized)."""
    max_reply_tokens: int | None = None
    """The reply-length limit the model is told about when a reply hits it."""
    repeats: RepeatGuard | None = None
    """Stops the turn when the model keeps making the same failing call (None: no guard)."""

    def scope(self) -> dict[str, Any]:
        """The identifying fields every event of this actor carries."""
        scope: dict[str, Any] = {"actor": self.name}
        if self.task_id:
            scope["task_id"] = self.task_id
        if self.stage:
            scope["stage"] = self.stage
        return scope

    def schemas(self) -> list[dict[str, Any]]:
        tools = self.toolbox.schemas() if self.toolbox else []
        return tools + self.control_schemas

    def notice(self, kind: str, text: str) -> None:
        if self.on_notice is not None:
            self.on_notice(kind, text)


@dataclass
class TurnResult:
    """What one turn produced."""

    turn: AssistantTurn
    number: int
    control_calls: list[ToolCall] = field(default_factory=list)
    tool_calls_run: int = 0
    unreadable_calls: int = 0
    """Calls answered with an error because their arguments were not valid JSON."""
    unknown_calls: int = 0
    """Calls answered with an error because no tool has their name."""

    @property
    def empty(self) -> bool:
        return self.turn.is_empty

    @property
    def cut_off(self) -> bool:
        """The reply ended at the reply-length limit (or was cut short as repetitive)."""
        return self.turn.finish_reason in ("length", REPETITION)


def take_turn(actor: Actor, number: int, **fields: Any) -> TurnResult:
    """Run turn ``number``: model call, then every toolbox call; returns control calls.

    ``fields`` are added to the ``model_call`` event (the evaluator's ``phase``, ``attempt``).
    Raises ``Cancelled`` when the actor's cancel token is set, ``StopRun("wall_clock")``
    when its deadline passes mid-reply, ``ModelError`` when no answer could be had, and
    ``RepeatedFailure`` when the actor's ``RepeatGuard`` saw the same failing call too
    often. Once the reply is in the thread, both leave every call of it answered (control
    calls as not run).
    """
    turn = _reply(actor)
    _log_model_call(actor, turn, {"turn": number, **fields})
    result = TurnResult(turn, number)
    if turn.is_empty:
        return result
    unreadable = unreadable_calls(turn.tool_calls)
    actor.thread.append(with_valid_arguments(turn).history_message(), turn=number)
    if result.cut_off:
        _tell_cut_off(actor, number, turn)
    known = {s["function"]["name"] for s in actor.toolbox.schemas()} if actor.toolbox else set()
    controls = {s["function"]["name"] for s in actor.control_schemas}
    if actor.repeats is not None:
        actor.repeats.start_round()
    for index, call in enumerate(turn.tool_calls):
        if actor.cancel is not None and actor.cancel.cancelled:
            # Every call answered, the control calls collected so far too: whoever goes on
            # with this thread (the chat's next message, a resumed stage) sends it as it is.
            for skipped in result.control_calls + turn.tool_calls[index:]:
                answer(actor, number, skipped, CANCELLED, is_error=True)
            raise Cancelled
        if call.id in unreadable:
            log_call(actor, number, call)
            text = _unreadable_answer(actor, call, unreadable[call.id], turn.finish_reason)
            answer(actor, number, call, text + _repeat_note(actor, call, text), is_error=True)
            actor.notice("refused", f"{call.name}: not run, its arguments could not be read")
            result.unreadable_calls += 1
        elif call.name in known:
            run_call(actor, number, call)
            result.tool_calls_run += 1
        elif call.name in controls:
            result.control_calls.append(call)
        else:  # a name the model made up: answered here, or the thread holds an open call
            log_call(actor, number, call)
            available = ", ".join(sorted(known | controls)) or "none"
            text = f"ERROR: unknown tool '{call.name}'. Available: {available}"
            answer(actor, number, call, text + _repeat_note(actor, call, text), is_error=True)
            actor.notice("refused", f"{call.name}: not run, there is no such tool")
            result.unknown_calls += 1
    if actor.repeats is not None and actor.repeats.tripped is not None:
        stuck, actor.repeats.tripped = actor.repeats.tripped, None
        for call in result.control_calls:
            log_call(actor, number, call)
            text = f"ERROR: not run: the harness stopped this turn ({stuck.detail})"
            answer(actor, number, call, text, is_error=True)
        actor.session.log(
            "repeated_failure", **actor.scope(), turn=number, tool=stuck.tool, count=stuck.count
        )
        raise stuck
    return result


def _repeat_note(actor: Actor, call: ToolCall, error: str) -> str:
    """What the actor's ``RepeatGuard`` adds to a failing call's answer ("" without one)."""
    return actor.repeats.failed(call, error) if actor.repeats is not None else ""


def ask_aside(actor: Actor, messages: list[dict[str, Any]], **fields: Any) -> AssistantTurn:
    """One request outside ``actor``'s thread (the summarizer's), asked as every turn is.

    The same ``ask`` as ``take_turn``: retries logged and shown, the actor's cancel token
    and deadline obeyed (``Cancelled``, ``StopRun("wall_clock")``), ``model_call`` logged
    under the actor's name with ``fields``. No tools are offered and the thread is not touched.
    """
    turn = _ask(actor, messages, [])
    _log_model_call(actor, turn, fields)
    return turn


def _log_model_call(actor: Actor, turn: AssistantTurn, fields: dict[str, Any]) -> None:
    total = actor.session.add_tokens(turn.usage.total)
    payload: dict[str, Any] = {
        **actor.scope(),
        **fields,
        "model": actor.model.name,
        "scripted": actor.scripted,
        "prompt_tokens": turn.usage.prompt_tokens,
        "completion_tokens": turn.usage.completion_tokens,
        "eval_tokens": turn.usage.completion_tokens,  # the reference's name for it
        "tokens_used_total": total,
        "finish_reason": turn.finish_reason,
        "tool_calls": [call.name for call in turn.tool_calls],
    }
    if turn.content:
        payload["content"] = turn.content
    if turn.reasoning:
        payload["reasoning"] = turn.reasoning
    actor.session.log("model_call", **payload)


def _reply(actor: Actor) -> AssistantTurn:
    """Ask the model, summarizing the thread first (or once after a refusal) when it is long."""
    tools = actor.schemas()
    if actor.context is not None:
        actor.context.before_request(actor, tools)
    try:
        return _ask_thread(actor, tools)
    except ContextOverflow as overflow:
        if actor.context is None or not actor.context.after_overflow(actor, overflow, tools):
            raise
    return _ask_thread(actor, tools)


def _ask_thread(actor: Actor, tools: list[dict[str, Any]]) -> AssistantTurn:
    messages = valid_history(actor.thread.messages())
    turn = _ask(actor, messages, tools)
    if actor.context is not None:
        actor.context.observe(messages, tools, turn.usage.prompt_tokens)
    return turn


def _ask(
    actor: Actor, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> AssistantTurn:
    def on_retry(attempt: int, reason: str, delay: float) -> None:
        actor.session.log(
            "model_retry",
            **actor.scope(),
            role=actor.name,
            attempt=attempt,
            reason=reason,
            delay=round(delay, 2),
        )
        actor.notice(
            "retry", f"{actor.name} model call failed ({reason}); retry {attempt} in {delay:.1f}s"
        )

    try:
        turn = ask(
            actor.model,
            messages,
            tools,
            on_delta=actor.on_delta,
            on_retry=on_retry,
            cancel=actor.cancel,
            deadline=actor.deadline,
        )
    except Cancelled:
        actor.session.log("model_call_cancelled", **actor.scope(), reason="interrupted")
        raise
    except DeadlineReached:
        actor.session.log("model_call_cancelled", **actor.scope(), reason="wall_clock")
        raise StopRun(
            "wall_clock", "wall clock cap reached mid-reply [TILTH_MAX_WALL_CLOCK_MINUTES]"
        ) from None
    return turn


def _unreadable_answer(actor: Actor, call: ToolCall, reason: str, finish: str | None) -> str:
    if finish == "length":
        return (
            f"ERROR: this {call.name} call was cut off and not run: your reply hit the "
            f"reply-length limit ({_limit(actor)}) before its arguments were complete. Call it "
            "again with shorter arguments (write a long file in parts: write_file a first "
            "part, then edit_file to add the rest)."
        )
    return (
        f"ERROR: the arguments of this {call.name} call could not be read ({reason}), so it "
        "was not run. Call it again with a valid JSON object as its arguments."
    )


def _limit(actor: Actor) -> str:
    return f"{actor.max_reply_tokens:,} tokens" if actor.max_reply_tokens else "max_tokens"


def _tell_cut_off(actor: Actor, number: int, turn: AssistantTurn) -> None:
    """Tell the person and, when no call carries the news, the model."""
    repeating = turn.finish_reason == REPETITION
    actor.session.log(
        "reply_cut_off",
        **actor.scope(),
        turn=number,
        finish_reason=turn.finish_reason,
        completion_tokens=turn.usage.completion_tokens,
    )
    if repeating:
        actor.notice("cut_off", "the reply only repeated itself; it was cut short")
        note = (
            "[tilth] Your last reply was cut short: it only repeated the same text. "
            "Do not repeat yourself; continue with the next step."
        )
    else:
        actor.notice("cut_off", f"{CUT_OFF_NOTICE} ({_limit(actor)}); it was cut off")
        note = (
            f"[tilth] Your last reply hit the reply-length limit ({_limit(actor)}) and was cut "
            "off. Keep replies shorter; continue where it stopped."
        )
    if not turn.tool_calls:
        # A cut-off call is answered as cut off; a cut-off text needs a word of its own.
        say(actor, note, turn=number, kind="cut_off")


def run_call(actor: Actor, number: int, call: ToolCall) -> None:
    """Log ``call``, run it with the actor's tools and answer it in the thread."""
    assert actor.toolbox is not None
    log_call(actor, number, call)
    outcome = (
        actor.run_tool(call)
        if actor.run_tool is not None
        else actor.toolbox.dispatch(call.name, call.arguments)
    )
    text = outcome.result
    if outcome.is_error or outcome.blocked:
        text += _repeat_note(actor, call, outcome.result)
    elif actor.repeats is not None:
        actor.repeats.succeeded(call)
    answer(actor, number, call, text, is_error=outcome.is_error, blocked=outcome.blocked)


def log_call(actor: Actor, number: int, call: ToolCall, args: Any = None) -> None:
    """Log ``tool_call`` (arguments parsed when possible, else the raw text)."""
    if args is None:
        try:
            args = call.parse_arguments()
        except ValueError:
            args = {"unparseable": call.arguments[:2000]}
    actor.session.log(
        "tool_call", **actor.scope(), turn=number, tool=call.name, call_id=call.id, args=args
    )


def answer(
    actor: Actor,
    number: int,
    call: ToolCall,
    text: str,
    *,
    is_error: bool = False,
    blocked: bool = False,
) -> None:
    """Answer ``call`` in the thread and log ``tool_result``."""
    actor.thread.append({"role": "tool", "tool_call_id": call.id, "content": text}, turn=number)
    actor.session.log(
        "tool_result",
        **actor.scope(),
        turn=number,
        tool=call.name,
        call_id=call.id,
        result_preview=text[:PREVIEW_CHARS],
        result_chars=len(text),
        is_error=is_error,
        blocked=blocked,
    )


def say(actor: Actor, text: str, **meta: Any) -> None:
    """Append a harness-authored user message (a nudge, feedback, a note)."""
    actor.thread.append({"role": "user", "content": text}, **meta)


def deadline_of(started: float, minutes: float) -> float | None:
    """The monotonic instant a wall-clock cap of ``minutes`` from ``started`` ends (0: none)."""
    return started + minutes * 60 if minutes else None
