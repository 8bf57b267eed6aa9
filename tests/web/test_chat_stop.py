"""Stopping a chat turn the server runs: ``POST .../stop`` and the chat view's Stop button.

The turn waits for a model that does not answer; stopping it interrupts it as Ctrl-C
does in a terminal, and the server itself goes on serving. The server is the real
``tilth serve`` in a subprocess (a stop that signalled the server would end it).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.web.sse import messages
from tests.web.support import serve, wait_for
from tests.web.test_browser import new_page
from tests.web.test_chat_shutdown import INTERRUPTED, new_chat
from tilth.model import FakeServer, Script, reply
from tilth.model.script import delay

pytestmark = pytest.mark.timeout(120)

SILENT = 60.0
"""How long the model keeps quiet: far longer than the test waits."""


def test_stop_interrupts_a_served_chat_turn_and_the_server_goes_on(
    tilth_home: Path, tmp_path: Path
) -> None:
    session = new_chat(tmp_path / "work")
    script = Script({"chat": [delay(SILENT, reply("never waited for")), reply("Back.")]})
    streamed: list[Any] = []
    with FakeServer(script) as model, serve(model.tilth_env(worker="chat")) as served:

        def slow_turn() -> None:
            with (
                served.client(timeout=SILENT) as client,
                client.stream(
                    "POST", f"/api/sessions/{session.id}/messages", json={"text": "take your time"}
                ) as response,
            ):
                streamed.extend(m.data for m in messages(response))

        reader = threading.Thread(target=slow_turn, daemon=True)
        reader.start()
        wait_for(lambda: len(model.requests) == 1, 20, "the model call")
        started = time.monotonic()
        stopped = served.api("POST", f"/api/sessions/{session.id}/stop")
        assert stopped.status_code == 200, stopped.text
        assert stopped.json()["cancelled"] is True
        reader.join(10)
        assert time.monotonic() - started < 10
        assert served.process.poll() is None, "the stop ended the server"
        finished = [d for d in streamed if d.get("type") == "turn_finished"]
        assert [d["outcome"] for d in finished] == ["cancelled"], streamed

        # the chat goes on in the same server; nothing left to stop
        again = served.api("POST", f"/api/sessions/{session.id}/messages", {"text": "still there?"})
        assert again.status_code == 200 and "Back." in again.text
        nothing = served.api("POST", f"/api/sessions/{session.id}/stop").json()
        assert nothing == {"stopped": None, "cancelled": False}

    thread = [m.message for m in session.threads.get("chat").read()]
    assert INTERRUPTED in [m.get("content") for m in thread]
    assert "never waited for" not in str(thread)


def test_the_chat_view_stop_button_interrupts_the_turn(
    browser: Any, tilth_home: Path, tmp_path: Path
) -> None:
    session = new_chat(tmp_path / "work")
    script = Script({"chat": [delay(SILENT, reply("never waited for"))]})
    with FakeServer(script) as model, serve(model.tilth_env(worker="chat")) as served:
        page = new_page(browser)
        page.goto(f"{served.base}/s/{session.id}?token={served.token}")
        page.wait_for_selector("[data-test=composer]")
        assert page.is_disabled("[data-test=stop-turn]"), "nothing to stop yet"
        page.fill("[data-test=composer]", "take your time")
        page.click("[data-test=send]")
        wait_for(lambda: len(model.requests) == 1, 20, "the model call")
        page.click("[data-test=stop-turn]")
        page.wait_for_selector("[data-test=chat-note]:has-text('interrupted')", timeout=15000)
        assert page.is_disabled("[data-test=stop-turn]")
        assert page.is_enabled("[data-test=send]")
        assert served.process.poll() is None
        assert page.errors == []
