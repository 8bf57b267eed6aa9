"""What counts as reply content for the stall clock of a streamed answer (``http_chat``):
a reasoning model thinking for longer than the timeout, a tool call whose arguments trickle,
a usage-only last event — none of them is a keep-alive, so none may stall out."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from tests.model.test_hostile_wire import (
    DONE,
    STREAM_HEAD,
    ModelFactory,
    RawServer,
    ServerFactory,
    _event,
)
from tilth.model.call import ask

USER = [{"role": "user", "content": "hi"}]
TIMEOUT = 0.5
GAP = 0.1
"""Each piece comes well within the timeout; the stream as a whole lasts three timeouts."""


@pytest.fixture
def raw_server() -> Iterator[ServerFactory]:
    made: list[RawServer] = []

    def make(*answers: object) -> RawServer:
        made.append(RawServer([lambda a=a: a for a in answers]))
        return made[-1]

    yield make
    for server in made:
        server.listener.close()


def _slowly(events: list[bytes]) -> list[bytes | float]:
    spaced: list[bytes | float] = [STREAM_HEAD]
    for event in events:
        spaced += [event, GAP]
    return [*spaced, DONE]


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_a_model_that_thinks_longer_than_the_timeout_is_not_stalled(
    fast_model: ModelFactory, raw_server: ServerFactory, key: str
) -> None:
    thinking = [_event({key: f"step {n}. "}) for n in range(int(3 * TIMEOUT / GAP))]
    server = raw_server(_slowly([*thinking, _event({"content": "done"})]))
    model = fast_model(None, base_url=server.base_url, max_retries=0, timeout_seconds=TIMEOUT)
    started = time.monotonic()
    turn = ask(model, USER, [], deadline=time.monotonic() + 30)
    assert time.monotonic() - started > 2 * TIMEOUT, "the stream outlasted the timeout"
    assert turn.content == "done"
    assert turn.reasoning is not None and "step 14." in turn.reasoning
    assert server.requests == 1, "no retry"


def test_a_tool_call_whose_arguments_trickle_in_is_not_stalled(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    opened = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "glob"}}
    text = json.dumps({"pattern": "**/*.py"})
    pieces = [text[i : i + 2] for i in range(0, len(text), 2)]
    trickle = [_event({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces]
    server = raw_server(_slowly([_event({"tool_calls": [opened]}), *trickle]))
    model = fast_model(None, base_url=server.base_url, max_retries=0, timeout_seconds=TIMEOUT)
    turn = ask(model, USER, [], deadline=time.monotonic() + 30)
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("glob", text)]
    assert server.requests == 1


def test_a_usage_only_last_event_after_keep_alives_is_taken(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    words = [_event({"content": w}) for w in ("a", "b")]
    usage = b'data: {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2}}\n\n'
    writes = [*_slowly(words)[:-1], b": keep-alive\n\n", 0.3, usage, DONE]
    server = raw_server(writes)
    model = fast_model(None, base_url=server.base_url, max_retries=0, timeout_seconds=TIMEOUT)
    turn = ask(model, USER, [], deadline=time.monotonic() + 30)
    assert (turn.content, turn.usage.completion_tokens) == ("ab", 2)
