"""Findings of the user trial against llama.cpp (issue 23), piped ``tilth chat``.

A reply cut off mid-line by the reply-length limit left its note glued to the cut text
(``…</tool_note: the reply hit the reply-length limit``): the note is a line of its own.
"""

from __future__ import annotations

from pathlib import Path

from tests.chat.test_chat_wild import chat
from tilth.model import FakeServer, Script, reply


def test_the_cut_off_note_starts_its_own_line_after_a_reply_cut_mid_line(
    tmp_path: Path,
) -> None:
    cut = reply("I will now explain the whole modu", finish_reason="length")
    with FakeServer(Script({"worker": [cut]})) as server:
        result = chat(tmp_path, ["explain the module"], server, TILTH_MAX_REPLY_TOKENS="64")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "I will now explain the whole modu" in lines, result.stdout
    assert any(line.startswith("note: the reply hit the reply-length limit") for line in lines), (
        result.stdout
    )
