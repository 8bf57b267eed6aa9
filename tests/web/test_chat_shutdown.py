"""A chat that ``tilth serve`` opened ends as ``tilth chat`` ends when left: status
``all_done`` and a ``stop`` event — also when the server is stopped (Ctrl-C or SIGTERM)
while a turn waits for the model, which is then interrupted as Ctrl-C interrupts it in a
terminal. Read back through ``tilth.session``."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.web.sse import messages
from tests.web.support import serve, wait_for
from tilth import chat
from tilth.config import load_settings
from tilth.model import FakeServer, Script, ScriptedModel, reply
from tilth.model.script import delay
from tilth.session.store import Session

pytestmark = pytest.mark.timeout(120)

INTERRUPTED = "[tilth] The person interrupted this turn."


def new_chat(directory: Path) -> Session:
    """A chat session as ``tilth chat`` leaves it: no turns yet, status all_done."""
    directory.mkdir()
    settings = load_settings()
    engine = chat.ChatEngine.start(
        settings, directory, ScriptedModel(Script({"*": []})), index_in_background=False
    )
    engine.close()
    return Session.open(settings.sessions_dir, engine.id)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_served_chat_ends_all_done_when_the_server_stops_mid_turn(
    tilth_home: Path, tmp_path: Path, stop: signal.Signals
) -> None:
    session = new_chat(tmp_path / "work")
    assert session.status == "all_done"
    script = Script({"chat": [reply("Hello there."), delay(60, reply("never waited for"))]})
    streamed: list[dict[str, Any]] = []
    with FakeServer(script) as model, serve(model.tilth_env(worker="chat")) as served:
        answer = served.api("POST", f"/api/sessions/{session.id}/messages", {"text": "hi"})
        assert answer.status_code == 200, answer.text
        assert session.status == "all_done", "the page lets go of the chat after its turn"

        def slow_turn() -> None:
            with (
                served.client(timeout=60) as client,
                client.stream(
                    "POST", f"/api/sessions/{session.id}/messages", json={"text": "take your time"}
                ) as response,
            ):
                streamed.extend(m.data for m in messages(response))

        reader = threading.Thread(target=slow_turn, daemon=True)
        reader.start()
        wait_for(lambda: len(model.requests) == 2, 20, "the second model call")
        started = time.monotonic()
        os.killpg(served.process.pid, stop)
        served.process.wait(15)
        assert time.monotonic() - started < 10, "the pending model call did not hold the stop"
        reader.join(10)

    assert session.status == "all_done"
    events = session.events.events()
    assert events[-1].type == "stop" and events[-1].payload["reason"] == "all_done"
    assert [e.payload["turn"] for e in events if e.type == "model_call"] == [1]
    finished = [d for d in streamed if d.get("type") == "turn_finished"]
    assert [d["outcome"] for d in finished] == ["cancelled"], streamed
    thread = [m.message for m in session.threads.get("chat").read()]
    assert thread[-1]["content"] == INTERRUPTED
    assert "never waited for" not in str(thread)
