"""What stays on the screen of a real terminal after ``tilth chat`` (tests/chat/screen.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chat.screen import Screen
from tests.chat.tty import TtyChat, chat_env, server_for
from tilth.model import reply
from tilth.model.script import Reply, stall

pytestmark = pytest.mark.timeout(120)

ROWS, COLS = 16, 100
LINES = 45


def slowly(answer: Reply, pieces: int) -> Reply:
    """``answer`` streamed with a short silence every few chunks (a model writing)."""
    for after in range(2, pieces, 3):
        answer = stall(0.06, answer, after=after)
    return answer


def test_a_reply_taller_than_the_terminal_is_in_the_scrollback_once(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    text = "".join(f"- item {n:02d} of a long streamed answer\n" for n in range(1, LINES + 1))
    server = server_for([slowly(reply(text), len(text) // 16)])
    log = tmp_path / "tty.log"
    # A stale LINES (a shell exports it; xdist's workers set 24) must not hide the real size.
    env = chat_env(tmp_path / "home", server, LINES="40")
    chat = TtyChat(["work"], env, tmp_path, log, dimensions=(ROWS, COLS))
    try:
        chat.prompt()
        chat.send("a long answer please")
        chat.expect(r"── turn 1 ·")
        chat.prompt()
        assert chat.leave() == 0
    finally:
        chat.close()
        server.stop()

    screen = Screen(ROWS, COLS)
    with log.open(encoding="utf-8", newline="") as output:
        screen.feed(output.read())
    seen = {n: screen.count(f"item {n:02d} of a long streamed answer") for n in range(1, LINES + 1)}
    assert set(seen.values()) == {1}, f"lines left behind more than once: {seen}"
    items = [line for line in screen.lines() if "of a long streamed answer" in line]
    assert [line.split("item ")[1][:2] for line in items] == [
        f"{n:02d}" for n in range(1, LINES + 1)
    ]
