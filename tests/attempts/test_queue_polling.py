"""The queue is polled from the launch on, and often only while work put on it waits to
start (each poll is a few queries holding the interpreter that running attempts share)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from tilth.attempts import engine
from tilth.config import load_settings
from tilth.session.store import Session

STOPPED = {"reason": "all_done", "detail": None}


def _off_any_loop(body: Any) -> None:
    """Run ``body`` in a thread of its own: DBOS refuses its synchronous calls where an event
    loop runs, as one does in this process's main thread once a browser test has started
    Playwright's synchronous API."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            body()
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


def _polling() -> float:
    from dbos import DBOS

    queue = DBOS.retrieve_queue(engine.QUEUE)
    assert queue is not None
    return queue.polling_interval_sec


def _held(release: threading.Event) -> Any:
    def local() -> dict[str, Any]:
        assert release.wait(60), "the test never let the workflow end"
        return STOPPED

    return local


def test_the_queue_is_polled_slowly_only_while_all_its_work_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILTH_HOME", str(tmp_path / "home"))
    _off_any_loop(lambda: _slow_only_while_all_runs(tmp_path))


def _slow_only_while_all_runs(tmp_path: Path) -> None:
    engine.launch(load_settings(), lambda session_id, sessions_dir: STOPPED, parallel=1)
    first_done, second_done, third_done = threading.Event(), threading.Event(), threading.Event()
    try:
        assert _polling() == engine.POLL_SECONDS
        first = engine.enqueue_attempt(
            Session("a", tmp_path / "a"), local=_held(first_done), again=False
        )
        second = engine.enqueue_attempt(
            Session("b", tmp_path / "b"), local=_held(second_done), again=False
        )
        # One at a time: the second waits on the queue, so it stays polled often.
        assert engine.wait([first, second], seconds=1.5) == [None, None]
        assert _polling() == engine.POLL_SECONDS

        first_done.set()
        # The first ends, the second starts: nothing of ours waits any more.
        assert engine.wait([first], seconds=30) == [STOPPED]
        assert first not in engine._ended_here  # handed out once, then kept by the database
        assert engine.wait([first], seconds=30) == [STOPPED]
        assert engine.wait([second], seconds=1.5) == [None]
        assert _polling() == engine.IDLE_POLL_SECONDS

        # Putting work on it makes it fast again before the work waits.
        third = engine.enqueue_attempt(
            Session("c", tmp_path / "c"), local=_held(third_done), again=False
        )
        assert _polling() == engine.POLL_SECONDS
        second_done.set()
        third_done.set()
        assert engine.wait([second, third], seconds=30) == [STOPPED, STOPPED]
        engine.launch(load_settings(), lambda session_id, sessions_dir: STOPPED, parallel=1)
        assert _polling() == engine.POLL_SECONDS  # a launch is work about to come
    finally:
        for event in (first_done, second_done, third_done):
            event.set()
        engine.shutdown()


def test_a_new_home_s_queue_is_polled_as_soon_as_the_launch_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DBOS starts a queue's worker thread when it launches and then looks for new queues
    # once a second: a queue registered only after the launch waited for that look. And it
    # starts that thread from a thread of its own: the launch waits for it (on a busy
    # machine, the look came after the launch had returned).
    monkeypatch.setenv("TILTH_HOME", str(tmp_path / "home"))
    assert not (tmp_path / "home" / "queue.sqlite").exists()
    _off_any_loop(_polled_when_launched)


def _polled_when_launched() -> None:
    engine.launch(load_settings(), lambda session_id, sessions_dir: STOPPED, parallel=2)
    try:
        names = [thread.name for thread in threading.enumerate()]
        for queue in engine.QUEUES:  # the sessions' and the attempts'
            assert f"queue-worker-{queue}" in names
        assert _polling() == engine.POLL_SECONDS
    finally:
        engine.shutdown()


def test_the_queue_starts_where_an_event_loop_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A notebook or a web app calls the library from inside its running loop: DBOS refuses
    # its synchronous calls there, so the engine makes them in a thread of its own.
    monkeypatch.setenv("TILTH_HOME", str(tmp_path / "home"))

    async def inside_a_loop() -> None:
        engine.launch(load_settings(), lambda session_id, sessions_dir: STOPPED, parallel=2)
        engine.hurry()

    try:
        _off_any_loop(lambda: asyncio.run(inside_a_loop()))
        _off_any_loop(lambda: _expect_polling(engine.POLL_SECONDS))
    finally:
        engine.shutdown()


def _expect_polling(seconds: float) -> None:
    assert _polling() == seconds
