"""A chat is open in one front end at a time: a terminal's ``tilth chat``, or ``tilth serve``
while a turn it was sent runs (the page lets go of the chat between turns).

Two engines on one chat would each watch the directory and take the other's edits for
their own. The terminal is a real pseudo-terminal, the server the real ``tilth serve``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.chat.tty import TtyChat, chat_env
from tests.warm_cli import shared
from tests.web.support import serve, wait_for
from tests.web.test_chat_shutdown import new_chat
from tilth.model import FakeServer, Script, reply
from tilth.model.script import delay

pytestmark = pytest.mark.timeout(120)


def test_the_server_refuses_a_chat_a_terminal_has_open_and_the_other_way_round(
    tilth_home: Path, tmp_path: Path
) -> None:
    session = new_chat(tmp_path / "work")
    script = Script(
        {
            "worker": [
                reply("From the terminal."),
                delay(6, reply("From the page.")),
                reply("The terminal again."),
            ]
        }
    )
    with FakeServer(script) as model, serve(model.tilth_env()) as served:
        url = f"/api/sessions/{session.id}/messages"
        terminal = TtyChat(["--resume", session.id], chat_env(tilth_home, model), tmp_path)
        try:
            terminal.prompt()
            terminal.send("hello")
            terminal.expect(r"From the terminal\.")
            terminal.prompt()

            refused = served.api("POST", url, {"text": "me too"})
            assert refused.status_code == 409, refused.text
            assert "open in another front end" in refused.json()["error"]
            assert refused.json()["hint"]
            rewind = {"to": "cp-0001", "scope": "conversation"}
            assert (
                served.api("POST", f"/api/sessions/{session.id}/rewind", rewind).status_code == 409
            )
            assert terminal.leave() == 0
        finally:
            terminal.close()

        # The page holds the chat while its turn runs: a terminal is told so plainly ...
        answered: list[Any] = []
        turn = threading.Thread(
            target=lambda: answered.append(served.api("POST", url, {"text": "now me"})),
            daemon=True,
        )
        turn.start()
        wait_for(lambda: len(model.requests) == 2, 20, "the page's model call")
        again = shared().run(
            ["chat", "--resume", session.id],
            input_text="hello again\n",
            env=chat_env(tilth_home, model),
        )
        assert again.returncode != 0
        assert "open in another front end" in again.stderr
        turn.join(30)
        assert answered[0].status_code == 200 and "From the page." in answered[0].text

        # ... and lets go of it when the turn ends: the terminal takes it back
        back = shared().run(
            ["chat", "--resume", session.id],
            input_text="back to the terminal\n",
            env=chat_env(tilth_home, model),
        )
        assert back.returncode == 0, back.stderr
        assert "The terminal again." in back.stdout

    prompts = [m.message["content"] for m in session.threads.get("chat").read()]
    assert "me too" not in prompts and "hello again" not in prompts
    assert prompts[-4:] == [
        "now me",
        "From the page.",
        "back to the terminal",
        "The terminal again.",
    ]
