"""ScriptedModel: the Model seam without HTTP, always labelled as scripted."""

from __future__ import annotations

import pytest

from tilth.errors import ModelError
from tilth.model import Model, Script, ScriptedModel, delay, error, raw, reply, tool_call


def test_replays_turns_and_records_requests() -> None:
    model = ScriptedModel(Script([reply(None, tool_call("read_file", path="a")), reply("done")]))
    messages = [{"role": "user", "content": "go"}]
    first = model.complete(messages, [])
    messages.append(first.history_message())
    second = model.complete(messages, [])
    assert first.tool_calls[0].parse_arguments() == {"path": "a"}
    assert first.tool_calls[0].id == "call_1"
    assert second.content == "done"
    recorded = model.requests
    assert [len(r["messages"]) for r in recorded] == [1, 2], "requests are copies, not live lists"
    assert recorded[0]["model"] == "scripted"


@pytest.mark.parametrize(
    ("given", "shown"),
    [("scripted", "scripted"), ("worker", "scripted:worker"), ("demo-scripted", "demo-scripted")],
)
def test_name_always_says_scripted(given: str, shown: str) -> None:
    assert ScriptedModel(Script([]), name=given).name == shown


def test_name_picks_the_models_queue() -> None:
    script = Script({"worker": [reply("for the worker")], "evaluator": [reply("for the judge")]})
    assert ScriptedModel(script, "evaluator").complete([], []).content == "for the judge"
    assert ScriptedModel(script, "worker").complete([], []).content == "for the worker"


def test_error_replies_raise_model_error() -> None:
    model = ScriptedModel(Script([error(429, "rate limited")]), name="worker")
    with pytest.raises(ModelError, match="scripted:worker failed: HTTP 429: rate limited"):
        model.complete([], [])


def test_exhausted_script_raises() -> None:
    with pytest.raises(ModelError, match="script exhausted for model scripted"):
        ScriptedModel(Script([])).complete([], [])


def test_delay_then_answers() -> None:
    assert ScriptedModel(Script([delay(0.01, reply("later"))])).complete([], []).content == "later"


def test_is_a_model() -> None:
    model: Model = ScriptedModel(Script([reply("x")]))
    assert model.complete([], []).content == "x"


def test_raw_http_replies_need_the_fake_server() -> None:
    with pytest.raises(ModelError, match="only be played by the fake server"):
        ScriptedModel(Script([raw("<html>")])).complete([], [])
