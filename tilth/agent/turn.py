"""One tool-using turn, recorded the same way for every actor.

``take_turn`` calls the model with the thread, logs ``model_call``, appends the
assistant message, runs every call the ``ToolBox`` knows (logging ``tool_call``
and ``tool_result`` and appending the tool message) and hands back the calls it
does not know (the actor's control tools: ``submit_case``, ``ask_user``,
``write_seed``...). The caller must ``answer`` each of those before the next
turn — providers reject a thread with an unanswered tool call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tilth.model.base import AssistantTurn, Model, OnDelta, ToolCall
from tilth.session.store import Session
from tilth.session.threads import Thread

if TYPE_CHECKING:
    from tilth.tools import ToolBox

PREVIEW_CHARS = 500


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


@dataclass
class TurnResult:
    """What one turn produced."""

    turn: AssistantTurn
    number: int
    control_calls: list[ToolCall] = field(default_factory=list)
    tool_calls_run: int = 0

    @property
    def empty(self) -> bool:
        return self.turn.is_empty


def take_turn(actor: Actor, number: int, **fields: Any) -> TurnResult:
    """Run turn ``number``: model call, then every toolbox call; returns control calls.

    ``fields`` are added to the ``model_call`` event (the evaluator's ``phase``, ``attempt``).
    """
    turn = actor.model.complete(actor.thread.messages(), actor.schemas(), on_delta=actor.on_delta)
    total = actor.session.add_tokens(turn.usage.total)
    payload: dict[str, Any] = {
        **actor.scope(),
        "turn": number,
        "model": actor.model.name,
        "scripted": actor.scripted,
        "prompt_tokens": turn.usage.prompt_tokens,
        "completion_tokens": turn.usage.completion_tokens,
        "eval_tokens": turn.usage.completion_tokens,  # the reference's name for it
        "tokens_used_total": total,
        "finish_reason": turn.finish_reason,
        "tool_calls": [call.name for call in turn.tool_calls],
        **fields,
    }
    if turn.content:
        payload["content"] = turn.content
    if turn.reasoning:
        payload["reasoning"] = turn.reasoning
    actor.session.log("model_call", **payload)
    result = TurnResult(turn, number)
    if turn.is_empty:
        return result
    actor.thread.append(turn.history_message(), turn=number)
    known = {s["function"]["name"] for s in actor.toolbox.schemas()} if actor.toolbox else set()
    for call in turn.tool_calls:
        if call.name not in known:
            result.control_calls.append(call)
            continue
        assert actor.toolbox is not None
        log_call(actor, number, call)
        outcome = actor.toolbox.dispatch(call.name, call.arguments)
        answer(
            actor, number, call, outcome.result, is_error=outcome.is_error, blocked=outcome.blocked
        )
        result.tool_calls_run += 1
    return result


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
