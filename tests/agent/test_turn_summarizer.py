"""The compaction summarizer is an actor of the turn loop (SPEC §12): its own model call is
cancelled with the turn and stops at the wall-clock deadline, like every other reply.

In-process, through the real ``OpenAIModel`` and the loopback fake server: a thread long
enough to be summarized before its next request, and a summarizer that is slow to answer.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tilth.agent.context import ContextKeeper
from tilth.agent.stops import StopRun
from tilth.agent.turn import Actor, take_turn
from tilth.config import Endpoint
from tilth.model import FakeServer, OpenAIModel, Script, delay, reply
from tilth.model.call import Cancelled, CancelToken
from tilth.model.fake_server import FAKE_API_KEY
from tilth.session.store import Session
from tilth.timeline.rewind.summarize import SUMMARY_PROMPT

SLOW_SUMMARY = delay(5, reply("(summary) the worker read many files."))


def is_summary_request(body: object) -> bool:
    messages = body.get("messages") if isinstance(body, dict) else None
    return bool(messages) and messages[0].get("content") == SUMMARY_PROMPT


def worker(tmp_path: Path, server: FakeServer, **options: object) -> Actor:
    """A worker whose thread is past 90% of a 2,000-token window (by the first guess)."""
    session = Session.create(tmp_path / "sessions", tmp_path / "repo")
    thread = session.threads.get("worker")
    thread.append({"role": "system", "content": "You are the worker."})
    thread.append({"role": "user", "content": "Task T-001: count the words."})
    for number in range(8):
        thread.append({"role": "assistant", "content": f"Reading part {number}."})
        thread.append({"role": "user", "content": f"part {number}: " + "words " * 150})
    endpoint = Endpoint("worker", server.base_url, FAKE_API_KEY, "worker")
    model = OpenAIModel(endpoint, max_retries=0, timeout_seconds=30)
    return Actor(session, "worker", model, thread, context=ContextKeeper(2_000), **options)  # type: ignore[arg-type]


def summarizer_calls(actor: Actor) -> list[dict[str, object]]:
    return [
        e.payload
        for e in actor.session.events.events()
        if e.type == "model_call" and e.payload.get("actor") == "summarizer"
    ]


def test_cancelling_the_turn_cancels_the_summarizers_call(tmp_path: Path) -> None:
    script = Script({"worker": [SLOW_SUMMARY, reply("Done.")]})
    with FakeServer(script) as server:
        token = CancelToken()
        actor = worker(tmp_path, server, cancel=token)
        before = actor.thread.read()

        def cancel_once_the_summarizer_is_asked() -> None:
            while not any(is_summary_request(r["body"]) for r in server.requests):
                time.sleep(0.01)
            token.cancel()

        canceller = threading.Thread(target=cancel_once_the_summarizer_is_asked, daemon=True)
        canceller.start()
        with pytest.raises(Cancelled):
            take_turn(actor, 1)
        canceller.join(timeout=30)
        asked = len(server.requests)
    assert asked == 1, "the worker's own request was never sent"
    assert actor.thread.read() == before, "no summary replaced the thread"
    kinds = [e.type for e in actor.session.events.events()]
    assert "summarize" not in kinds and "context_compacted" not in kinds
    assert summarizer_calls(actor) == []


def test_the_wall_clock_deadline_stops_the_summarizers_call(tmp_path: Path) -> None:
    script = Script({"worker": [SLOW_SUMMARY, reply("Done.")]})
    with FakeServer(script) as server:
        actor = worker(tmp_path, server, deadline=time.monotonic())
        before = actor.thread.read()
        with pytest.raises(StopRun) as stopped:
            take_turn(actor, 1)
        asked = [r["body"] for r in server.requests]
    assert stopped.value.reason == "wall_clock"
    assert all(is_summary_request(body) for body in asked), "the worker's request never went"
    assert actor.thread.read() == before
    events = actor.session.events.events()
    cancelled = [e.payload for e in events if e.type == "model_call_cancelled"]
    assert cancelled == [{"actor": "summarizer", "reason": "wall_clock"}]
    assert "summarize" not in [e.type for e in events]


def test_the_summarizers_call_is_logged_as_the_turn_loop_logs_every_call(
    tmp_path: Path,
) -> None:
    script = Script({"worker": [reply("(summary) parts 0-3 read."), reply("Done.")]})
    with FakeServer(script) as server:
        actor = worker(tmp_path, server)
        result = take_turn(actor, 1, step=1)
    assert result.turn.content == "Done."
    calls = summarizer_calls(actor)
    assert len(calls) == 1 and calls[0]["model"] == "worker"
    assert calls[0]["content"] == "(summary) parts 0-3 read."
    summary = [m for m in actor.thread.read() if m.meta.get("kind") == "summary"]
    assert len(summary) == 1
