"""Ctrl-C in ``tilth chat`` abandons a model call that has not answered (a reply that does
not start, a stream that stalls) at once: the turn is recorded as interrupted, as a
streamed one is, and the prompt comes back without waiting for the endpoint."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.chat.tty import TtyChat, chat_env, server_for
from tests.sessionview import SessionView
from tilth.model import reply
from tilth.model.script import delay, stall

pytestmark = pytest.mark.timeout(120)

SILENT_SECONDS = 60.0
"""How long the fake endpoint keeps quiet: far longer than any wait the test allows."""
PROMPTLY = 5.0


def interrupt(chat: TtyChat) -> float:
    """Ctrl-C; how long until the turn was recorded as interrupted and the prompt is back."""
    started = time.monotonic()
    chat.child.send("\x03")
    chat.expect_exact("cancelled: the turn was interrupted", timeout=PROMPTLY)
    chat.prompt()
    return time.monotonic() - started


def test_ctrl_c_abandons_a_model_call_that_does_not_answer(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"
    server = server_for(
        [
            delay(SILENT_SECONDS, reply("an answer nobody waits for")),
            stall(SILENT_SECONDS, reply("streaming words " * 40), after=2),
            reply("Back again."),
        ]
    )
    chat = TtyChat(["work"], chat_env(home, server), tmp_path, tmp_path / "tty.log")
    try:
        chat.prompt()
        chat.send("answer slowly")
        chat.child.expect_exact("answer slowly")
        waited = time.monotonic() + 30
        while not server.requests and time.monotonic() < waited:
            time.sleep(0.05)  # until the request is out (the endpoint then says nothing)
        assert len(server.requests) == 1
        interrupt(chat)

        chat.send("stream slowly")
        chat.expect_exact("streaming words")  # the first pieces, then silence
        interrupt(chat)

        chat.send("are you there?")
        chat.expect(r"Back again\.", timeout=PROMPTLY)
        chat.prompt()
        assert chat.leave() == 0
    finally:
        chat.close()
        server.stop()

    session = SessionView.only(home / "sessions")
    thread = session.thread("chat")
    text = json.dumps(thread)
    assert "an answer nobody waits for" not in text and "streaming words" not in text
    interrupted = [
        m for m in thread if m.get("content") == "[tilth] The person interrupted this turn."
    ]
    assert len(interrupted) == 2
    assert thread[-1]["content"] == "Back again."
    calls = session.payloads("model_call")
    assert [c["turn"] for c in calls] == [3], "an abandoned call is not recorded as answered"
    assert session.record().status == "all_done"
