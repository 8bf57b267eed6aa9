"""`tilth summarize`: a model-written summary replaces part of a thread; rewinds still work."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.timeline.rewind.test_capture_rewind import Driver, _cli, _session
from tilth.model import FakeServer, Script, reply
from tilth.session.threads import StoredMessage
from tilth.timeline.rewind.summarize import cut_at, split_thread

THREAD = "worker-T-001"


@pytest.fixture
def server() -> Iterator[FakeServer]:
    script = Script([reply("SUMMARY ONE"), reply("SUMMARY TWO"), reply("")])
    with FakeServer(script) as fake:
        yield fake


def _env(server: FakeServer) -> dict[str, str]:
    return {
        "TILTH_BASE_URL": server.base_url,
        "TILTH_API_KEY": "test-key",
        "TILTH_WORKER_MODEL": "fake-worker",
        "TILTH_MODEL_MAX_RETRIES": "0",
    }


def _texts(driver: Driver) -> list[str]:
    return [m["content"] for m in driver.session.threads.get(THREAD).messages()]


def test_summarize_then_rewind_in_both_directions(
    tilth_home: Path, tmp_path: Path, server: FakeServer
) -> None:
    sessions = tilth_home / "sessions"
    driver = Driver(_session(tmp_path, sessions))
    cps = [driver.turn() for _ in range(4)]
    sid = driver.session.id
    original = _texts(driver)
    assert original[:2] == ["turn 1", "result 1"] and len(original) == 8

    done = _cli(sessions, "summarize", sid, "--at", cps[1], "--direction", "up-to", **_env(server))
    assert done.returncode == 0, done.stderr
    texts = _texts(driver)
    assert texts[0].startswith("[Summary of 4 earlier message(s)") and "SUMMARY ONE" in texts[0]
    assert texts[1:] == original[4:]
    stored = driver.session.threads.get(THREAD).read()
    assert stored[0].id == f"{THREAD}#9"
    assert stored[0].meta["summary_of"] == [f"{THREAD}#{n}" for n in range(1, 5)]
    sent = server.requests[-1]["body"]["messages"]
    assert "turn 1" in sent[1]["content"] and "turn 3" not in sent[1]["content"]
    events = [e for e in driver.session.events.events() if e.type == "summarize"]
    assert events and events[-1].payload["summary_id"] == f"{THREAD}#9"
    calls = [e for e in driver.session.events.events() if e.type == "model_call"]
    assert calls[-1].payload["actor"] == "summarizer"

    # A checkpoint after the summarized part keeps the summary; one inside it gets the
    # original messages back.
    later = _cli(sessions, "rewind", sid, "--to", cps[2], "--scope", "conversation", "-y")
    assert later.returncode == 0, later.stderr
    assert _texts(driver) == [texts[0], *original[4:6]]
    inside = _cli(sessions, "rewind", sid, "--to", cps[0], "--scope", "conversation", "-y")
    assert inside.returncode == 0, inside.stderr
    assert _texts(driver) == original[:2]

    # Ids are never reused, and a "from" summary is undone the same way.
    driver = Driver(driver.session)
    driver.turns = 4
    fifth = driver.turn()
    assert driver.session.threads.get(THREAD).last_id() == f"{THREAD}#11"
    tail = _cli(sessions, "summarize", sid, "--at", cps[0], "--direction", "from", **_env(server))
    assert tail.returncode == 0, tail.stderr
    assert _texts(driver)[:2] == original[:2] and "SUMMARY TWO" in _texts(driver)[2]
    back = _cli(sessions, "rewind", sid, "--to", fifth, "--scope", "conversation", "-y")
    assert back.returncode == 0, back.stderr
    assert _texts(driver) == [*original[:2], "turn 5", "result 5"]


def test_an_empty_summary_changes_nothing(
    tilth_home: Path, tmp_path: Path, server: FakeServer
) -> None:
    sessions = tilth_home / "sessions"
    driver = Driver(_session(tmp_path, sessions))
    cps = [driver.turn() for _ in range(2)]
    server.script.next("fake-worker", {})  # use up the two real summaries
    server.script.next("fake-worker", {})
    before = _texts(driver)
    result = _cli(
        sessions,
        "summarize",
        driver.session.id,
        "--at",
        cps[0],
        "--direction",
        "from",
        **_env(server),
    )
    assert result.returncode == 1
    assert "empty summary" in result.stderr and "Traceback" not in result.stderr
    assert _texts(driver) == before
    nothing = _cli(
        sessions,
        "summarize",
        driver.session.id,
        "--at",
        cps[1],
        "--direction",
        "from",
        **_env(server),
    )
    assert nothing.returncode == 2 and "nothing to summarize" in nothing.stderr


def _m(n: int, role: str = "user", **meta: object) -> StoredMessage:
    return StoredMessage(f"t#{n}", {"role": role, "content": str(n)}, dict(meta))


def test_boundaries_keep_tool_results_with_their_calls_and_the_system_prompt() -> None:
    stored = [_m(1, "system"), _m(2), _m(3, "assistant"), _m(4, "tool"), _m(5, "tool"), _m(6)]
    before, chosen, after = split_thread(stored, "t#3", "up-to")
    assert [m.id for m in before] == ["t#1"]
    assert [m.id for m in chosen] == ["t#2", "t#3", "t#4", "t#5"]
    assert [m.id for m in after] == ["t#6"]
    before, chosen, _ = split_thread(stored, "t#3", "from")
    assert [m.id for m in chosen] == ["t#6"]


def test_cut_at_resolves_heads_through_nested_summaries() -> None:
    inner = _m(
        5,
        summary_of=["t#1", "t#2"],
        replaced=[{"id": m.id, "message": m.message, "meta": m.meta} for m in (_m(1), _m(2))],
    )
    outer = _m(
        7,
        summary_of=["t#5", "t#3"],
        replaced=[{"id": m.id, "message": m.message, "meta": m.meta} for m in (inner, _m(3))],
    )
    thread = [outer, _m(4), _m(6)]
    assert [m.id for m in cut_at(thread, "t#1") or []] == ["t#1"]
    assert [m.id for m in cut_at(thread, "t#3") or []] == ["t#5", "t#3"]
    assert [m.id for m in cut_at(thread, "t#4") or []] == ["t#7", "t#4"]
    assert cut_at(thread, "t#99") is None
    assert cut_at(thread, None) == []
