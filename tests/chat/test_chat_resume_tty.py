"""``tilth chat --resume`` on a real pseudo-terminal shows where the chat left off."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.chat.support import start
from tests.chat.tty import TtyChat, chat_env, server_for
from tilth.model import reply, tool_call

pytestmark = pytest.mark.timeout(120)


def test_resuming_shows_the_last_turn_before_the_prompt(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    engine, _ = start(
        tmp_path,
        work,
        [
            reply("Sure.", tool_call("write_file", path="a.txt", content="a\n")),
            reply("First answer."),
            reply(None, tool_call("write_file", path="hello.py", content="print('hi')\n")),
            reply("Wrote **hello.py**; run it with `python hello.py`."),
        ],
    )
    engine.send("make a.txt")
    engine.send("write hello")
    engine.close()

    server = server_for([])
    log = tmp_path / "tty.log"
    chat = TtyChat(["--resume", engine.id], chat_env(tmp_path / "home", server), tmp_path, log)
    try:
        chat.expect_exact("2 turn(s) so far")
        chat.expect_exact("/help for commands")
        chat.prompt()
        assert chat.leave() == 0
    finally:
        chat.close()
        server.stop()

    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", log.read_text(encoding="utf-8"))
    before_prompt = shown.split("/help for commands")[0]
    assert "› write hello" in before_prompt
    assert "→ write_file hello.py (1 line)" in before_prompt
    assert "Wrote hello.py; run it with python hello.py." in before_prompt  # as Markdown
    assert "First answer" not in before_prompt and "make a.txt" not in before_prompt
