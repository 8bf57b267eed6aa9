"""Every word of a long reply reaches a real terminal, at any width (tests/chat/screen.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.chat.screen import Screen
from tests.chat.tty import TtyChat, chat_env, server_for
from tilth.model import reply
from tilth.model.script import stall

pytestmark = pytest.mark.timeout(120)

ROWS = 30
WORDS = [f"w{n}" for n in range(80)]
CODE = "print('" + "-".join(f"c{n}" for n in range(40)) + "')"


def streamed(text: str) -> object:
    """``text`` streamed with short silences, as a model writes."""
    answer = reply(text)
    for after in range(2, 12, 3):
        answer = stall(0.05, answer, after=after)
    return answer


def screen_after(tmp_path: Path, cols: int, text: str) -> Screen:
    work = tmp_path / "work"
    work.mkdir()
    server = server_for([streamed(text)])
    log = tmp_path / "tty.log"
    chat = TtyChat(["work"], chat_env(tmp_path / "home", server), tmp_path, log, (ROWS, cols))
    try:
        chat.prompt()
        chat.send("write a long paragraph")
        chat.expect(r"── turn 1 ·")
        chat.prompt()
        assert chat.leave() == 0
    finally:
        chat.close()
        server.stop()
    screen = Screen(ROWS, cols)
    with log.open(encoding="utf-8", newline="") as output:
        screen.feed(output.read())
    return screen


@pytest.mark.parametrize("cols", [60, 120])
def test_an_80_word_reply_shows_every_word(tmp_path: Path, cols: int) -> None:
    text = "Here it is: " + " ".join(WORDS) + ".\n\n```python\n" + CODE + "\n```\n\n**done**"
    screen = screen_after(tmp_path, cols, text)
    lines = screen.lines()
    start = next(i for i, line in enumerate(lines) if "Here it is:" in line)
    end = next(i for i, line in enumerate(lines) if "── turn 1" in line)
    reply_lines = lines[start:end]
    assert all(len(line) <= cols for line in reply_lines)
    shown = re.findall(r"\bw\d+\b", " ".join(reply_lines))
    assert shown == WORDS, f"words lost or repeated at {cols} columns: {reply_lines}"
    code = "".join(line.strip() for line in reply_lines if "c" in line and "w" not in line)
    assert all(f"c{n}" in code for n in range(40)), reply_lines
    assert any(line.strip() == "done" for line in reply_lines), "Markdown is rendered"
