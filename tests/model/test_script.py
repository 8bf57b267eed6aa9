"""The one script format: builders, queues per model, numbering, JSON files."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from tilth.errors import ModelError, UsageError
from tilth.model import Script, delay, empty, error, raw, reply, tool_call, tool_call_raw
from tilth.model.script import turn_from_reply


def test_builders_make_plain_json() -> None:
    built = [
        reply("hi", tool_call("read_file", path="a"), finish_reason="length", reasoning="r"),
        reply(None, tool_call_raw("bash", "{broken")),
        error(429, "slow down"),
        delay(0.5, reply("late")),
        empty(),
        raw("<html>", status=502, content_type="text/html"),
    ]
    assert json.loads(json.dumps(built)) == built
    assert built[0]["tool_calls"] == [{"name": "read_file", "arguments": {"path": "a"}}]
    assert built[1]["tool_calls"][0]["arguments"] == "{broken"
    assert built[2] == {"type": "error", "status": 429, "message": "slow down"}
    assert empty()["content"] is None and empty()["tool_calls"] == []


def test_turn_from_reply() -> None:
    turn = turn_from_reply(
        reply(
            "text",
            tool_call("grep", pattern="x"),
            tool_call_raw("bash", "{oops"),
            prompt_tokens=7,
            completion_tokens=3,
            reasoning="because",
        )
    )
    assert turn.content == "text"
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("call_1", "grep", '{"pattern": "x"}'),
        ("call_2", "bash", "{oops"),
    ]
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (7, 3)
    assert turn.finish_reason == "tool_calls"
    assert turn.reasoning == "because"
    assert turn_from_reply(reply("plain")).finish_reason == "stop"
    assert turn_from_reply(empty()).is_empty
    with pytest.raises(ModelError, match="HTTP 500: boom"):
        turn_from_reply(error(500, "boom"))


def test_list_script_serves_in_order_then_fails_loudly() -> None:
    script = Script([reply("one"), reply("two")])
    assert script.remaining() == 2
    assert script.next("any", {})["content"] == "one"
    assert script.next("other", {})["content"] == "two"
    assert script.next("m", {}) == error(500, "script exhausted for model m")
    assert script.remaining() == 0


def test_dict_script_uses_the_models_queue_then_the_fallback() -> None:
    script = Script({"worker": [reply("w1")], "evaluator": [reply("e1")], "*": [reply("anyone")]})
    assert script.models == ["worker", "evaluator"]
    assert script.remaining("worker") == 2
    assert script.next("evaluator", {})["content"] == "e1"
    assert script.next("worker", {})["content"] == "w1"
    assert script.next("worker", {})["content"] == "anyone"
    assert script.next("evaluator", {})["type"] == "error"


def test_function_script_sees_model_and_request() -> None:
    seen: list[tuple[str, int]] = []

    def answer(model: str, request: dict) -> dict:
        seen.append((model, len(request["messages"])))
        return reply(f"{model} got {len(request['messages'])}", tool_call("noop"))

    script = Script(answer)
    first = script.next("m", {"messages": [1, 2]})
    second = script.next("m", {"messages": [1]})
    assert first["content"] == "m got 2"
    assert seen == [("m", 2), ("m", 1)]
    assert [first["tool_calls"][0]["id"], second["tool_calls"][0]["id"]] == ["call_1", "call_2"]
    with pytest.raises(TypeError):
        script.to_json()


def test_tool_call_ids_are_numbered_across_the_script_and_replies_are_copies() -> None:
    shared = reply(None, tool_call("a"), tool_call("b"))
    script = Script(
        {"*": [shared, delay(0, shared), reply(None, {**tool_call("c"), "id": "mine"})]}
    )
    ids = [[c["id"] for c in script.next("m", {})["tool_calls"]]]
    ids.append([c["id"] for c in script.next("m", {})["then"]["tool_calls"]])
    ids.append([c["id"] for c in script.next("m", {})["tool_calls"]])
    assert ids == [["call_1", "call_2"], ["call_3", "call_4"], ["mine"]]
    assert "id" not in shared["tool_calls"][0], "the caller's dict is not changed"


def test_each_reply_is_served_exactly_once_across_threads() -> None:
    count = 200
    script = Script([reply(str(n)) for n in range(count)])
    served: list[str] = []
    lock = threading.Lock()

    def drain() -> None:
        for _ in range(count // 8):
            content = script.next("m", {})["content"]
            with lock:
                served.append(content)

    threads = [threading.Thread(target=drain) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(served, key=int) == [str(n) for n in range(count)]


def test_json_file_round_trip(tmp_path: Path) -> None:
    original = Script(
        {"worker": [reply("w", tool_call("bash", command="ls"))], "*": [error(503), empty()]}
    )
    path = tmp_path / "script.json"
    path.write_text(original.to_json())
    loaded = Script.from_file(path)
    assert loaded.to_json() == original.to_json()
    assert loaded.next("worker", {})["tool_calls"][0]["arguments"] == {"command": "ls"}
    assert loaded.next("worker", {})["status"] == 503


def test_hand_written_files_may_leave_out_defaults(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text('[{"content": "hello"}, {"tool_calls": [{"name": "x"}]}]')
    script = Script.from_file(path)
    assert turn_from_reply(script.next("m", {})).content == "hello"
    call = turn_from_reply(script.next("m", {})).tool_calls[0]
    assert (call.name, call.arguments) == ("x", "{}")


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("{oops", "is not valid JSON"),
        ('"just a string"', "must hold a list or an object"),
        ('[{"type": "mystery"}]', "unknown type 'mystery'"),
        ('[{"type": "error", "status": 200}]', "error status must be an HTTP error code"),
        ('[{"tool_calls": [{"arguments": {}}]}]', "each tool call needs a string name"),
        ('{"worker": {"content": "x"}}', "replies for 'worker' must be a list"),
        ('[{"type": "delay", "seconds": -1, "then": {}}]', "non-negative"),
        ('[{"type": "raw", "body": 5}]', "raw body must be a string"),
        ('[{"type": "error", "status": 429, "retry_after": "soon"}]', "retry_after must be"),
        (
            '{"worker": [{"content": "a"}, {"contnt": "b"}]}',
            "script['worker'][1]: unknown key 'contnt' in a reply (did you mean 'content'?",
        ),
        (
            '[{"tool_calls": [{"name": "x", "args": {}}]}]',
            "script[0].tool_calls[0]: unknown key 'args' in a tool call",
        ),
        (
            '[{"type": "delay", "seconds": 1, "then": {"usage": {"prompt": 3}}}]',
            "script[0].then.usage: unknown key 'prompt' in usage (did you mean 'prompt_tokens'?",
        ),
        (
            '[{"type": "error", "status": 503, "mesage": "x"}]',
            "script[0]: unknown key 'mesage' in a reply of type 'error'",
        ),
        ('[{"usage": {"prompt_tokens": -1}}]', "prompt_tokens must be a non-negative integer"),
    ],
)
def test_bad_script_files_are_named_errors(tmp_path: Path, text: str, complaint: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(UsageError) as caught:
        Script.from_file(path)
    assert str(path) in str(caught.value)
    assert complaint in str(caught.value)


def test_a_reply_without_usage_costs_the_same_from_json_as_from_reply(tmp_path: Path) -> None:
    """One default, whichever way the script was written (docs/models.md)."""
    path = tmp_path / "script.json"
    path.write_text(
        '[{"content": "a"}, {"content": "b", "usage": {"prompt_tokens": 100}},'
        ' {"content": "c", "usage": null}]'
    )
    script = Script.from_file(path)
    usages = [turn_from_reply(script.next("m", {})).usage for _ in range(3)]
    helper = turn_from_reply(reply("a")).usage
    assert usages[0] == helper and (helper.prompt_tokens, helper.completion_tokens) == (10, 5)
    partial = turn_from_reply(reply("b", prompt_tokens=100)).usage
    assert usages[1] == partial
    assert (usages[2].prompt_tokens, usages[2].completion_tokens) == (0, 0)  # none reported


def test_missing_script_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read script"):
        Script.from_file(tmp_path / "nope.json")
