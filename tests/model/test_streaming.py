"""Streamed replies through our own client against the shipped fake server."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable

import pytest

from tilth.errors import ModelError
from tilth.model import FakeServer, OpenAIModel, Script, function_tool, raw, reply, tool_call
from tilth.model.base import Delta
from tilth.model.script import stall
from tilth.ui.io import IO
from tilth.ui.progress import TerminalProgress, _Ticking

ModelFactory = Callable[..., OpenAIModel]
USER = [{"role": "user", "content": "build the thing"}]
WRITE = function_tool(
    "write_file", "Write", {"path": {"type": "string"}, "content": {"type": "string"}}, ["path"]
)
CONTENT = 'def f():\n    return "héllo ✓ {not json}"\n' * 20


def test_tool_calls_split_over_many_chunks_are_reassembled_exactly(
    fast_model: ModelFactory,
) -> None:
    script = Script(
        [
            reply(
                "Writing two files now.",
                tool_call("write_file", path="a.py", content=CONTENT),
                tool_call("write_file", path="b/ü.py", content="x = 1\n"),
                prompt_tokens=321,
                completion_tokens=99,
                reasoning="first I think, then I write",
            )
        ]
    )
    deltas: list[Delta] = []
    with FakeServer(script) as server:
        turn = fast_model(server).complete(USER, [WRITE], on_delta=deltas.append)
    body = server.requests[0]["body"]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert turn.content == "Writing two files now."
    assert turn.reasoning == "first I think, then I write"
    assert [c.parse_arguments() for c in turn.tool_calls] == [
        {"path": "a.py", "content": CONTENT},
        {"path": "b/ü.py", "content": "x = 1\n"},
    ]
    # Sent as llama.cpp sends them: characters beyond ASCII as they are, not escaped.
    whole = json.dumps({"path": "a.py", "content": CONTENT}, ensure_ascii=False)
    assert turn.tool_calls[0].arguments == whole
    assert [c.id for c in turn.tool_calls] == ["call_1", "call_2"]
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (321, 99)
    assert turn.finish_reason == "tool_calls"
    # The pieces arrive in order, with a rising live count, before the turn is returned.
    kinds = [d.kind for d in deltas]
    assert kinds.index("reasoning") < kinds.index("text") < kinds.index("tool_call")
    assert "".join(d.text for d in deltas if d.kind == "text") == "Writing two files now."
    starts = [d.text for d in deltas if d.kind == "tool_call" and not d.arguments]
    assert starts == ["write_file", "write_file"]
    more = [d for d in deltas if d.kind == "tool_call" and d.arguments]
    assert len(more) > 20 and {d.text for d in more} == {"write_file"}, "arguments keep it live"
    counts = [d.completion_tokens for d in deltas]
    assert counts == sorted(counts) and counts[-1] > counts[0] > 0


def test_a_stalled_stream_is_retried(fast_model: ModelFactory) -> None:
    retries: list[str] = []
    script = Script([stall(3.0, reply("too late, " * 20)), reply("second try")])
    deltas: list[Delta] = []
    with FakeServer(script) as server:
        model = fast_model(
            server, timeout_seconds=0.5, on_retry=lambda _, why, __: retries.append(why)
        )
        turn = model.complete(USER, [], on_delta=deltas.append)
    assert turn.content == "second try"
    assert retries == ["no answer within 0.5s"]
    assert len(server.requests) == 2
    assert any(d.text.startswith("too late") for d in deltas), "the stall came mid-reply"


def test_a_stream_that_keeps_stalling_fails_with_the_setting_named(
    fast_model: ModelFactory,
) -> None:
    with FakeServer(Script([stall(3.0, reply("never"))])) as server:
        with pytest.raises(ModelError) as caught:
            fast_model(server, timeout_seconds=0.4, max_retries=0).complete(USER, [])
    assert "no answer within 0.4s (after 1 attempt)" in str(caught.value)
    assert caught.value.hint and "TILTH_MODEL_TIMEOUT_SECONDS" in caught.value.hint


def test_an_endpoint_that_rejects_stream_is_called_without_it_from_then_on(
    fast_model: ModelFactory,
) -> None:
    refused: list[str] = []
    script = Script([reply("one"), reply("two")])
    with FakeServer(script, reject_stream=True) as server:
        model = fast_model(server, on_stream_refused=refused.append)
        assert model.complete(USER, []).content == "one"
        assert model.complete(USER, []).content == "two"
    streamed = [bool(r["body"].get("stream")) for r in server.requests]
    assert streamed == [True, False, False], "refused once, remembered for the run"
    assert len(refused) == 1 and "stream is not supported" in refused[0]


def test_an_endpoint_that_ignores_stream_is_read_in_one_piece(fast_model: ModelFactory) -> None:
    whole = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "in one piece"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    }
    refused: list[str] = []
    with FakeServer(Script([raw(json.dumps(whole)), reply("next")])) as server:
        model = fast_model(server, on_stream_refused=refused.append)
        turn = model.complete(USER, [])
        assert (turn.content, turn.usage.total) == ("in one piece", 7)
        assert model.complete(USER, []).content == "next"
    assert [bool(r["body"].get("stream")) for r in server.requests] == [True, False]
    assert refused == ["the endpoint answered a streamed request in one piece"]


def test_the_progress_line_counts_tokens_live() -> None:
    progress = TerminalProgress(IO(stdout=io.StringIO()), live=False)
    progress.status(task="T-001", stage="implementing", turn=2, tokens=1_500)
    progress.on_delta(Delta("reasoning", "hmm", 12))
    assert progress.line() == "T-001 · implementing · turn 2 · 1,500 tokens · thinking 12"
    progress.on_delta(Delta("text", "ok", 1_234))
    assert progress.line().endswith("receiving 1,234")
    progress.status(turn=3, tokens=2_900)
    assert progress.line() == "T-001 · implementing · turn 3 · 2,900 tokens"


def test_the_live_status_line_shows_how_long_the_step_has_taken() -> None:
    """A slow model's long prompt shows as slow, not stuck: the line's clock moves between
    deltas (the status re-reads it at every refresh)."""
    from rich.console import Console

    progress = TerminalProgress(IO(stdout=io.StringIO()), live=False)
    progress.status(task="T-001", stage="planning", turn=1, tokens=30)
    assert progress.ticking_line() == progress.line(), "no clock in the first second"
    time.sleep(1.1)
    assert progress.ticking_line() == "T-001 · planning · turn 1 · 30 tokens · 1s"
    screen = io.StringIO()
    Console(file=screen, width=120).print(_Ticking(progress))
    assert "planning · turn 1 · 30 tokens · 1s" in screen.getvalue()
    progress.status(turn=2)
    assert progress.ticking_line() == progress.line(), "a new step starts its own clock"
