"""What stays on the screen of a real terminal after ``tilth chat`` (tests/chat/screen.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chat.tty import screen_after_one_turn, streamed
from tilth.model import reply

pytestmark = pytest.mark.timeout(120)

ROWS, COLS = 16, 100
LINES = 45


def test_a_reply_taller_than_the_terminal_is_in_the_scrollback_once(tmp_path: Path) -> None:
    text = "".join(f"- item {n:02d} of a long streamed answer\n" for n in range(1, LINES + 1))
    answer = streamed(reply(text), len(text) // 16, 0.06)
    # A stale LINES (a shell exports it; xdist's workers set 24) must not hide the real size.
    screen = screen_after_one_turn(tmp_path, answer, (ROWS, COLS), LINES="40")
    seen = {n: screen.count(f"item {n:02d} of a long streamed answer") for n in range(1, LINES + 1)}
    assert set(seen.values()) == {1}, f"lines left behind more than once: {seen}"
    items = [line for line in screen.lines() if "of a long streamed answer" in line]
    assert [line.split("item ")[1][:2] for line in items] == [
        f"{n:02d}" for n in range(1, LINES + 1)
    ]
