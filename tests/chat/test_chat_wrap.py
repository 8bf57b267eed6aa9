"""Every word of a long reply reaches a real terminal, at any width (tests/chat/screen.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.chat.tty import screen_after_one_turn, streamed
from tilth.model import reply

pytestmark = pytest.mark.timeout(120)

ROWS = 30
WORDS = [f"w{n}" for n in range(80)]
CODE = "print('" + "-".join(f"c{n}" for n in range(40)) + "')"


@pytest.mark.parametrize("cols", [60, 120])
def test_an_80_word_reply_shows_every_word(tmp_path: Path, cols: int) -> None:
    text = "Here it is: " + " ".join(WORDS) + ".\n\n```python\n" + CODE + "\n```\n\n**done**"
    screen = screen_after_one_turn(tmp_path, streamed(reply(text), 12, 0.05), (ROWS, cols))
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
