"""OpenAIModel drives its own HTTP client against the loopback fake server."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tilth.config import Endpoint
from tilth.errors import ModelError
from tilth.model import (
    FakeServer,
    OpenAIModel,
    Script,
    delay,
    empty,
    error,
    function_tool,
    raw,
    reply,
    tool_call,
    tool_call_raw,
)
from tilth.model.openai_client import backoff_delay, is_retryable_status, retry_after

ModelFactory = Callable[..., OpenAIModel]
USER = [{"role": "user", "content": "build the thing"}]
READ_TOOL = function_tool("read_file", "Read a file", {"path": {"type": "string"}}, ["path"])


def test_text_reply_and_usage(fast_model: ModelFactory) -> None:
    script = Script([reply("hello there", prompt_tokens=123, completion_tokens=45)])
    with FakeServer(script) as server:
        turn = fast_model(server).complete(USER, [])
    assert turn.content == "hello there"
    assert turn.tool_calls == []
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (123, 45)
    assert turn.finish_reason == "stop"
    body = server.requests[0]["body"]
    assert body["model"] == "test-model"
    assert body["messages"] == USER
    assert "tools" not in body, "an empty tool list is not sent"


def test_tool_calls_keep_raw_arguments_and_tools_are_sent(fast_model: ModelFactory) -> None:
    script = Script(
        [
            reply(
                "reading two files",
                tool_call("read_file", path="a.py"),
                tool_call("read_file", path="b.py"),
                tool_call_raw("read_file", '{"path": "c.py"'),
            )
        ]
    )
    with FakeServer(script) as server:
        turn = fast_model(server).complete(USER, [READ_TOOL])
    assert [call.name for call in turn.tool_calls] == ["read_file"] * 3
    assert [call.id for call in turn.tool_calls] == ["call_1", "call_2", "call_3"]
    assert turn.tool_calls[0].parse_arguments() == {"path": "a.py"}
    assert turn.tool_calls[2].arguments == '{"path": "c.py"', (
        "malformed JSON reaches the loop as is"
    )
    with pytest.raises(ValueError, match="not valid JSON"):
        turn.tool_calls[2].parse_arguments()
    assert turn.finish_reason == "tool_calls"
    assert server.requests[0]["body"]["tools"] == [READ_TOOL]


def test_missing_usage_is_estimated_so_the_cap_keeps_counting(fast_model: ModelFactory) -> None:
    script = Script([{**reply("no usage here"), "usage": None}])
    with FakeServer(script) as server:
        turn = fast_model(server).complete(USER, [])
    assert turn.content == "no usage here"
    # About four characters a token: the 13 streamed characters and the prompt's JSON.
    assert turn.usage.completion_tokens == 4
    assert turn.usage.prompt_tokens == -(-len(json.dumps(USER)) // 4)


def test_empty_reply_is_an_empty_turn(fast_model: ModelFactory) -> None:
    with FakeServer(Script([empty()])) as server:
        turn = fast_model(server).complete(USER, [])
    assert turn.is_empty


def test_reasoning_fields_round_trip_through_history(fast_model: ModelFactory) -> None:
    details = [{"type": "reasoning.text", "text": "first read the tests", "index": 0}]
    script = Script(
        [
            reply(
                None,
                tool_call("read_file", path="x"),
                reasoning="thinking",
                reasoning_details=details,
            ),
            reply("done"),
        ]
    )
    with FakeServer(script) as server:
        model = fast_model(server)
        turn = model.complete(USER, [READ_TOOL])
        assert turn.reasoning == "thinking"
        assert turn.reasoning_details == details
        assert not turn.is_empty
        tool_answer = {"role": "tool", "tool_call_id": turn.tool_calls[0].id, "content": "x"}
        model.complete([*USER, turn.history_message(), tool_answer], [READ_TOOL])
    echoed = server.requests[1]["body"]["messages"][1]
    assert echoed["role"] == "assistant"
    assert echoed["reasoning"] == "thinking"
    assert echoed["reasoning_details"] == details
    assert echoed["tool_calls"][0]["function"] == {
        "name": "read_file",
        "arguments": json.dumps({"path": "x"}),
    }


def test_retries_500_then_429_then_succeeds(fast_model: ModelFactory) -> None:
    retries: list[tuple[int, str, float]] = []
    script = Script([error(500, "upstream broke"), error(429, "slow down"), reply("finally")])
    with FakeServer(script) as server:
        model = fast_model(server, on_retry=lambda *args: retries.append(args))
        turn = model.complete(USER, [])
    assert turn.content == "finally"
    assert len(server.requests) == 3
    assert [(attempt, reason) for attempt, reason, _ in retries] == [
        (1, "HTTP 500: upstream broke"),
        (2, "HTTP 429: slow down"),
    ]
    assert all(wait >= 0 for _, _, wait in retries)


def test_retries_are_bounded_and_the_error_says_why(fast_model: ModelFactory) -> None:
    retries: list[int] = []
    with FakeServer(Script([error(503, "overloaded")] * 10)) as server:
        model = fast_model(server, max_retries=2, on_retry=lambda n, *_: retries.append(n))
        with pytest.raises(ModelError) as caught:
            model.complete(USER, [])
    assert len(server.requests) == 3
    assert retries == [1, 2]
    message = str(caught.value)
    assert message == (
        f"could not get an answer from the worker model at {server.base_url}: "
        "HTTP 503: overloaded (after 3 attempts)"
    )
    assert "\n" not in message


def test_exhausted_script_fails_loudly(fast_model: ModelFactory) -> None:
    with FakeServer(Script([])) as server:
        with pytest.raises(ModelError, match="script exhausted for model test-model"):
            fast_model(server, max_retries=1).complete(USER, [])


def test_unreachable_endpoint_fails_after_bounded_retries(
    fast_model: ModelFactory, closed_port: int
) -> None:
    retries: list[str] = []
    base_url = f"http://127.0.0.1:{closed_port}/v1"
    model = fast_model(
        None, base_url=base_url, max_retries=2, on_retry=lambda _, why, __: retries.append(why)
    )
    with pytest.raises(ModelError) as caught:
        model.complete(USER, [])
    assert str(caught.value) == (
        f"could not reach the worker model at {base_url}: connection refused (after 3 attempts)"
    )
    assert retries == ["connection refused", "connection refused"]
    assert caught.value.hint and "TILTH_BASE_URL" in caught.value.hint


def test_timeout_is_retried(fast_model: ModelFactory) -> None:
    retries: list[str] = []
    script = Script([delay(3.0, reply("too late")), reply("in time")])
    with FakeServer(script) as server:
        model = fast_model(
            server, timeout_seconds=0.5, on_retry=lambda _, why, __: retries.append(why)
        )
        turn = model.complete(USER, [])
    assert turn.content == "in time"
    assert retries == ["no answer within 0.5s"]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_fail_at_once(fast_model: ModelFactory, status: int) -> None:
    retries: list[int] = []
    script = Script([error(status, "you did it wrong"), reply("never reached")])
    with FakeServer(script) as server:
        with pytest.raises(ModelError) as caught:
            fast_model(server, on_retry=lambda n, *_: retries.append(n)).complete(USER, [])
    assert len(server.requests) == 1
    assert retries == []
    assert str(caught.value) == (
        f"the worker model at {server.base_url} refused the request: "
        f"HTTP {status}: you did it wrong"
    )


def test_unauthorized_points_at_the_role_key(fast_model: ModelFactory) -> None:
    with FakeServer(Script([error(401, "invalid api key")])) as server:
        with pytest.raises(ModelError) as caught:
            fast_model(server, role="evaluator").complete(USER, [])
    assert "evaluator model" in str(caught.value)
    assert caught.value.hint and "TILTH_EVALUATOR_API_KEY" in caught.value.hint


def test_api_key_never_appears_in_errors(fast_model: ModelFactory, secret_key: str) -> None:
    # Providers sometimes echo the key back; neither the error nor the retry reason may show it.
    reasons: list[str] = []
    echo = f"Incorrect API key provided: {secret_key}"
    with FakeServer(Script([error(500, echo), error(401, echo)])) as server:
        with pytest.raises(ModelError) as caught:
            fast_model(server, on_retry=lambda _, why, __: reasons.append(why)).complete(USER, [])
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {secret_key}"
    shown = [str(caught.value), caught.value.hint or "", *reasons]
    assert all(secret_key not in text for text in shown)
    assert "Incorrect API key provided: ***" in str(caught.value)


def test_openrouter_decision_follows_the_base_url() -> None:
    def endpoint(url: str) -> Endpoint:
        return Endpoint(role="worker", base_url=url, api_key="k", model="m")

    assert endpoint("https://openrouter.ai/api/v1").is_openrouter
    assert not endpoint("http://127.0.0.1:8000/v1").is_openrouter
    assert not endpoint("https://api.openai.com/v1").is_openrouter
    assert OpenAIModel(endpoint("https://openrouter.ai/api/v1")).request_reasoning
    assert not OpenAIModel(endpoint("https://api.openai.com/v1")).request_reasoning


@pytest.mark.parametrize("forced", [True, False])
def test_reasoning_opt_in_is_sent_only_when_asked(fast_model: ModelFactory, forced: bool) -> None:
    with FakeServer(Script([reply("ok")])) as server:
        fast_model(server, request_reasoning=forced).complete(USER, [])
    body: dict[str, Any] = server.requests[0]["body"]
    if forced:
        assert body["reasoning"] == {"enabled": True}
    else:
        assert "reasoning" not in body


def test_backoff_doubles_with_bounded_jitter() -> None:
    assert backoff_delay(1, 1.0, rand=lambda: 0.0) == 0.5
    assert backoff_delay(1, 1.0, rand=lambda: 1.0) == 1.0
    assert backoff_delay(3, 1.0, rand=lambda: 1.0) == 4.0
    assert backoff_delay(30, 1.0, rand=lambda: 1.0) == 60.0, "capped"
    assert all(0.5 <= backoff_delay(1, 1.0) <= 1.0 for _ in range(50))


def test_which_statuses_are_retried() -> None:
    assert [
        s for s in (400, 401, 404, 408, 409, 422, 429, 500, 502, 503) if is_retryable_status(s)
    ] == [
        429,
        500,
        502,
        503,
    ]


def test_a_web_page_instead_of_json_fails_at_once(fast_model: ModelFactory) -> None:
    script = Script([raw("<html>welcome</html>", content_type="text/html"), reply("unused")])
    with FakeServer(script) as server:
        with pytest.raises(ModelError) as caught:
            fast_model(server).complete(USER, [])
    assert len(server.requests) == 1
    assert str(caught.value).startswith(
        f"unreadable reply from the worker model at {server.base_url}: not a chat completion"
    )
    assert caught.value.hint and "API root" in caught.value.hint


def test_an_error_inside_a_200_reply_is_retried(fast_model: ModelFactory) -> None:
    # OpenRouter reports some upstream failures this way.
    reasons: list[str] = []
    upstream = json.dumps({"error": {"message": "upstream timed out", "code": 502}})
    script = Script([raw(upstream), reply("recovered")])
    with FakeServer(script) as server:
        model = fast_model(server, on_retry=lambda _, why, __: reasons.append(why))
        assert model.complete(USER, []).content == "recovered"
    assert reasons == ["provider error: upstream timed out"]


def test_a_reply_without_choices_is_an_empty_turn(fast_model: ModelFactory) -> None:
    with FakeServer(Script([raw(json.dumps({"id": "x", "choices": []}))])) as server:
        turn = fast_model(server).complete(USER, [])
    assert turn.is_empty and turn.usage.total == 0


def test_retry_after_from_the_server_stretches_the_wait(fast_model: ModelFactory) -> None:
    waits: list[float] = []
    script = Script([{**error(429, "slow down"), "retry_after": 0.2}, reply("ok")])
    with FakeServer(script) as server:
        model = fast_model(server, on_retry=lambda _, __, wait: waits.append(wait))
        assert model.complete(USER, []).content == "ok"
    assert server.requests and len(server.requests) == 2
    assert waits == [0.2], "the server's Retry-After beats a millisecond backoff"


def test_retry_after_header_parsing() -> None:
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    # The HTTP-date form: seconds from now to it (tests/model/test_hostile_wire.py has more).
    assert retry_after({"retry-after": "Wed, 21 Oct 2026 07:28:05 GMT"}, now=1792567680.0) == 5.0
    assert retry_after({"retry-after": "-1"}) is None
    assert retry_after({}) is None
