"""A turn cancelled between its calls leaves a thread the next model call can send: every
call of the reply answered, the control calls collected before the stop too."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilth.agent.turn import Actor, take_turn
from tilth.model import Script, ScriptedModel, reply, tool_call
from tilth.model.base import ToolCall
from tilth.model.call import Cancelled, CancelToken
from tilth.seed.tools import CONTROL_SCHEMAS
from tilth.session.store import Session
from tilth.tools import READ_ONLY_TOOL_NAMES, ToolBox, ToolOutcome


def unanswered(messages: list[dict[str, object]]) -> list[str]:
    """Ids of the tool calls in ``messages`` that no tool message answers."""
    asked = [
        call["id"]  # type: ignore[index]
        for m in messages
        if m["role"] == "assistant"
        for call in m.get("tool_calls") or []  # type: ignore[attr-defined]
    ]
    answered = {m.get("tool_call_id") for m in messages if m["role"] == "tool"}
    return [id_ for id_ in asked if id_ not in answered]


def test_a_turn_cancelled_mid_reply_answers_its_collected_control_calls(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    script = Script(
        [
            reply(
                None,
                tool_call("ask_user", question="Which one?"),
                tool_call("read_file", path="a.txt"),
                tool_call("read_file", path="a.txt"),
            ),
            reply("Going on."),
        ]
    )
    model = ScriptedModel(script, "scripted-cancel")
    session = Session.create(tmp_path / "sessions", tmp_path)
    token = CancelToken()
    box = ToolBox(tmp_path, READ_ONLY_TOOL_NAMES)

    def stop_while_running(call: ToolCall) -> ToolOutcome:
        token.cancel()  # the person stops while the first read runs
        return box.dispatch(call.name, call.arguments)

    thread = session.threads.get("interviewer")
    thread.append({"role": "system", "content": "Interview."})
    thread.append({"role": "user", "content": "Begin."})
    actor = Actor(
        session,
        "interviewer",
        model,
        thread,
        box,
        control_schemas=CONTROL_SCHEMAS,
        cancel=token,
        run_tool=stop_while_running,
    )
    with pytest.raises(Cancelled):
        take_turn(actor, 1)
    messages = [m.message for m in thread.read()]
    assert unanswered(messages) == []
    answers = [m["content"] for m in messages if m["role"] == "tool"]
    assert answers[0] == "alpha\n" and len(answers) == 3
    assert all("not run: cancelled by the person" in text for text in answers[1:])

    actor.cancel = CancelToken()
    assert take_turn(actor, 2).turn.content == "Going on."
    assert unanswered(model.requests[1]["messages"]) == []
