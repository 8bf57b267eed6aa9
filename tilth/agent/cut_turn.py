"""Finishing a worker turn a stop cut short, before the stage's thread goes on.

A stop (Ctrl-C, the web UI's stop, SIGTERM) can land after a model reply was stored and
before each of its tool calls was answered. Providers refuse a thread with an unanswered
call, and a call answered only "not run" is easy to take for done: the model asked for it
and sees it in its history (the scripted worker did, and wrote its case on a file that was
never written, until the turn cap). So on resume each unanswered call is settled, in order:

- a call that never started (no ``tool_call`` event) runs now, as the turn would have run it;
- a call that started and may safely run twice (a read, ``write_file``) runs again;
- a call cut off while it ran (``bash``, ``edit_file``) is answered as cut off: it may have
  partly happened, and running it twice could do it twice;
- the stage's own submit call is answered with the feedback waiting for it, else as not run
  (the model submits again once it has checked the workspace).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilth.agent.turn import Actor, answer, run_call
from tilth.model.base import ToolCall
from tilth.session.events import payloads_of
from tilth.session.threads import StoredMessage

REPEATABLE = frozenset({"read_file", "write_file", "glob", "grep"})
"""Tools whose second run leaves the same result as one run."""
NOT_RUN = (
    "(This call was not run: the harness stopped before answering it. Check the workspace "
    "and repeat the call if you still need it.)"
)
CUT_OFF = (
    "(This call was cut off while it ran: the harness stopped before it finished, so it may "
    "have partly happened. Check the workspace and repeat the call if you still need it.)"
)


@dataclass(frozen=True)
class CutTurn:
    """The calls of the thread's last model reply that have no answer, and its turn."""

    number: int | None
    """The turn the reply belongs to (None: a thread that never recorded it)."""
    calls: tuple[ToolCall, ...]


def cut_turn(stored: list[StoredMessage]) -> CutTurn:
    """The unanswered calls of the last assistant message of ``stored`` (none: empty)."""
    for index in range(len(stored) - 1, -1, -1):
        message = stored[index].message
        if message.get("role") != "assistant":
            continue
        answered = {
            m.message.get("tool_call_id")
            for m in stored[index + 1 :]
            if m.message.get("role") == "tool"
        }
        calls = tuple(
            _tool_call(call)
            for call in message.get("tool_calls") or []
            if isinstance(call, dict) and call.get("id") not in answered
        )
        number = stored[index].meta.get("turn")
        return CutTurn(number if isinstance(number, int) else None, calls)
    return CutTurn(None, ())


def settle(actor: Actor, cut: CutTurn, submit_tool: str, feedback: str | None) -> str | None:
    """Answer every call of ``cut`` (running those that can run); returns the feedback
    still waiting (None when it answered the submit call)."""
    number = cut.number or 0
    started = _started(actor, cut.number)
    toolbox = actor.toolbox
    known = {s["function"]["name"] for s in toolbox.schemas()} if toolbox else set()
    for call in cut.calls:
        if call.name == submit_tool and feedback:
            answer(actor, number, call, feedback)
            feedback = None
        elif (
            toolbox is not None
            and call.name in known
            and (call.id not in started or call.name in REPEATABLE)
        ):
            run_call(actor, number, call)
        else:
            answer(actor, number, call, CUT_OFF if call.id in started else NOT_RUN)
    return feedback


def _started(actor: Actor, number: int | None) -> set[str]:
    """Ids of this actor's calls of turn ``number`` that logged ``tool_call`` (began to run)."""
    scope = actor.scope()
    found = set()
    for payload in payloads_of(actor.session.events.path, "tool_call"):
        if any(payload.get(key) != value for key, value in scope.items()):
            continue
        if number is None or payload.get("turn") == number:
            found.add(str(payload.get("call_id")))
    return found


def _tool_call(call: dict[str, Any]) -> ToolCall:
    function = call.get("function")
    function = function if isinstance(function, dict) else {}
    arguments = function.get("arguments")
    return ToolCall(
        str(call.get("id")),
        str(function.get("name")),
        arguments if isinstance(arguments, str) else "",
    )
