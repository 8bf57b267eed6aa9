"""The rewind picker on a real terminal: a full-screen list walked with the keys."""

from __future__ import annotations

import time
from pathlib import Path

import pexpect
import pytest

from tests.chat.screen import Screen
from tests.chat.support import chat_with_turns
from tests.chat.tty import TtyChat, chat_env, server_for
from tilth.model import reply

pytestmark = pytest.mark.timeout(180)

ROWS = 24
UP, DOWN, PGUP, PGDN, HOME, END = "\x1b[A", "\x1b[B", "\x1b[5~", "\x1b[6~", "\x1b[H", "\x1b[F"


class Picker:
    """What the terminal shows, read after each key."""

    def __init__(self, chat: TtyChat, log: Path, cols: int) -> None:
        self.chat, self.log, self.cols = chat, log, cols

    def rows(self) -> list[str]:
        assert self.chat._log is not None
        self.chat._log.flush()
        screen = Screen(ROWS, self.cols)
        with self.log.open(encoding="utf-8", newline="") as output:
            screen.feed(output.read())
        return ["".join(row).rstrip() for row in screen.grid]

    def key(self, keys: str, then: str) -> list[str]:
        """Press ``keys``; wait until the highlighted row starts with ``then``.

        The terminal is redrawn by differences, so the screen is read, not the stream.
        """
        self.chat.child.send(keys)
        deadline = time.monotonic() + 15
        while True:
            try:  # let pexpect read what arrived into the log
                self.chat.child.expect(pexpect.TIMEOUT, timeout=0.2)
            except pexpect.EOF:
                break
            rows = self.rows()
            chosen = [row for row in rows if row.startswith("❯")]
            if chosen and chosen[0].startswith(f"❯ {then}"):
                return rows
            if time.monotonic() > deadline:
                break
        raise AssertionError(f"no row {then!r} chosen: {rows}")


def chosen_number(rows: list[str]) -> int:
    return int(next(row for row in rows if row.startswith("❯"))[1:].split()[0])


@pytest.mark.parametrize("cols", [60, 120])
def test_the_picker_walked_with_the_keys_on_a_300_turn_chat(tmp_path: Path, cols: int) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "keep.txt").write_text("mine\n")
    sid = chat_with_turns(tmp_path, work, 300)
    server = server_for([reply("unused")])
    log = tmp_path / "tty.log"
    chat = TtyChat(
        ["--resume", sid], chat_env(tmp_path / "home", server), tmp_path, log, (ROWS, cols)
    )
    picker = Picker(chat, log, cols)
    try:
        chat.prompt()
        chat.esc_esc()
        chat.expect_exact("Go back to which turn?")
        rows = picker.key("", " 300  ")
        # the newest next to the prompt, chosen to start with; each row says when and what
        chosen = [row for row in rows if row.startswith("❯")]
        assert chosen and chosen[0].startswith("❯  300  "), rows
        assert "prompt 300" in chosen[0] and ("f300.txt" in chosen[0] or cols < 80), rows
        listed = [row for row in rows if "prompt " in row and "·" in row]
        assert listed[-1] == chosen[0], "the newest is the last row of the list"
        assert "prompt 299" in listed[-2] and "no files changed" in listed[-2][:cols]
        picker.key(UP * 3, " 297  ")
        picker.key(DOWN, " 298  ")
        paged = chosen_number(picker.key(PGUP, " 2"))
        assert 270 < paged < 295, "PgUp moves by a screenful"
        picker.key(HOME, "   1  ")
        assert 5 < chosen_number(picker.key(PGDN, "  ")) < 30
        picker.key(END, " 300  ")
        picker.key("15", "  15  ")  # a number jumps
        picker.key("\x7f", "   1  ")  # what is left typed: "1"
        picker.key("\x7f", "   1  ")
        rows = picker.key("prompt 29", " 299  ")  # words filter; the newest match chosen
        assert all("29" in row for row in rows if "·" in row and "prompt" in row)
        chat.child.send("\x1b")
        chat.expect_exact("cancelled; nothing was changed")
        chat.prompt()

        # Esc Esc again: choose with the arrows, then leave the action menu with Esc.
        chat.esc_esc()
        chat.expect_exact("Go back to which turn?")
        picker.key(UP * 2, " 298  ")
        chat.child.send("\r")
        rows = picker.key("", "1) code+conversation")
        assert any("turn 298 (prompt 298): what to go back to" in row for row in rows), rows
        assert any("undo:" in row for row in rows), "the plan is in view before anything acts"
        chat.child.send("\x1b")
        chat.expect_exact("cancelled; nothing was changed")
        chat.prompt()
        assert chat.leave() == 0
    finally:
        chat.close()
        server.stop()
    assert sorted(p.name for p in work.iterdir()) == ["keep.txt"]
