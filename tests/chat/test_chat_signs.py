"""Signs of life and a whole prompt in a real terminal: the status line, the bash tail,
and Ctrl-C while a tool runs (tests/chat/screen.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.chat.screen import Screen
from tests.chat.tty import PROMPT, TtyChat, chat_env, server_for
from tilth.model import reply, tool_call
from tilth.model.script import delay

pytestmark = pytest.mark.timeout(150)

ROWS = 24


def screen_of(log: Path, cols: int) -> Screen:
    screen = Screen(ROWS, cols)
    with log.open(encoding="utf-8", newline="") as output:
        screen.feed(output.read())
    return screen


def test_the_status_line_and_the_true_tail_of_a_bash_result(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    server = server_for(
        [
            delay(2.5, reply(None, tool_call("bash", command="seq 1 1500; exit 3"))),
            reply(None, tool_call("bash", command="seq 1 5000")),
            reply("Counted."),
        ]
    )
    log = tmp_path / "tty.log"
    chat = TtyChat(["work"], chat_env(tmp_path / "home", server), tmp_path, log, (ROWS, 100))
    try:
        chat.prompt()
        chat.send("count")
        # while the model says nothing: a spinner, what it waits for, the time so far, tokens
        chat.expect(r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] waiting for the model · 1s · \d+ tokens")
        chat.expect(r"── turn 1 ·")
        chat.prompt()
        assert chat.leave() == 0
    finally:
        chat.close()
        server.stop()
    lines = screen_of(log, 100).lines()
    at = next(i for i, line in enumerate(lines) if "→ bash: seq 1 1500" in line)
    assert [line.strip() for line in lines[at + 1 : at + 7]] == [
        "... 1496 more line(s)",
        *(str(n) for n in range(1497, 1501)),
        "[exit 3]",
    ]
    # Past the tool's own cap the count is not known: the tail is still the true one.
    at = next(i for i, line in enumerate(lines) if "→ bash: seq 1 5000" in line)
    assert [line.strip() for line in lines[at + 1 : at + 7]] == [
        "... earlier lines not shown (the output was cut to its head and tail)",
        *(str(n) for n in range(4997, 5001)),
        "[exit 0]",
    ]
    assert not any("waiting for the model" in line for line in lines), "the status line goes"


@pytest.mark.parametrize("cols", [60, 120])
def test_ctrl_c_while_a_tool_runs_leaves_a_whole_prompt(tmp_path: Path, cols: int) -> None:
    work = tmp_path / "work"
    work.mkdir()
    server = server_for(
        [
            reply(None, tool_call("bash", command="sleep 6; echo late-$((6*7))")),
            reply("Here again."),
        ]
    )
    log = tmp_path / "tty.log"
    chat = TtyChat(["work"], chat_env(tmp_path / "home", server), tmp_path, log, (ROWS, cols))
    try:
        chat.prompt()
        chat.send("sleep a while")
        chat.expect(r"running bash · \d+s")
        chat.child.send("\x03")
        chat.expect_exact("what it still shows follows before your next turn")
        chat.prompt()
        time.sleep(6)  # the tool ends meanwhile; nothing it prints may land on the prompt
        chat.child.send("x")
        chat.expect_exact("x")
        time.sleep(0.5)
        screen = screen_of(log, cols)
        rows = ["".join(row).rstrip() for row in screen.grid]
        prompt_rows = [i for i, row in enumerate(rows) if row.startswith(PROMPT)]
        assert prompt_rows, rows
        assert rows[prompt_rows[-1]] == f"{PROMPT} x", rows
        assert not any("late-42" in row or "[exit" in row for row in rows), rows
        chat.child.send("\x7f")
        chat.send("again")
        chat.expect(r"Here again\.")
        chat.expect(r"── turn 2 ·")
        chat.prompt()
        assert chat.leave() == 0
    finally:
        chat.close()
        server.stop()
    lines = screen_of(log, cols).lines()
    late = next(i for i, line in enumerate(lines) if "late-42" in line)
    cancelled = next(i for i, line in enumerate(lines) if "the turn was interrupted" in line)
    again = next(i for i, line in enumerate(lines) if "Here again." in line)
    assert late < cancelled < again, "the cancelled turn's last lines come before the next turn"
