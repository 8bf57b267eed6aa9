"""Slash command parsing: what is a command, and what each accepts."""

from __future__ import annotations

import pytest

from tilth.chat.commands import Command, UnknownCommand, help_text, is_command, parse
from tilth.errors import UsageError


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/rewind", Command("rewind")),
        ("/rewind 3", Command("rewind", turn=3)),
        ("/rewind 3 code", Command("rewind", turn=3, scope="code")),
        ("/REWIND 2 code+conversation", Command("rewind", turn=2, scope="both")),
        ("/rewind 1 conversation", Command("rewind", turn=1, scope="conversation")),
        ("/fork", Command("fork")),
        ("/fork 4", Command("fork", turn=4)),
        ("/summarize 2 up-to", Command("summarize", turn=2, direction="up-to")),
        ("/summarize 2 from", Command("summarize", turn=2, direction="from")),
        ("/summarize", Command("summarize")),
        ("/undo", Command("undo")),
        ("/checkpoints", Command("checkpoints")),
        ("  /help  ", Command("help")),
        ("/quit", Command("exit")),
        ("/exit", Command("exit")),
    ],
)
def test_commands_parse(line: str, expected: Command) -> None:
    assert parse(line) == expected


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("/rewind x", "'x' is not a turn number"),
        ("/rewind 0", "'0' is not a turn number"),
        ("/rewind 1 sideways", "'sideways' is not a scope"),
        ("/rewind 1 code extra", "too many arguments"),
        ("/summarize 1 later", "'later' is not from or up-to"),
        ("/undo now", "/undo takes no arguments"),
        ("/fork 1 2", "too many arguments"),
    ],
)
def test_bad_arguments_say_what_is_wrong(line: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        parse(line)
    assert caught.value.hint and caught.value.hint.startswith("usage: /")


def test_an_unknown_command_lists_the_commands() -> None:
    with pytest.raises(UnknownCommand, match="unknown command /frobnicate") as caught:
        parse("/frobnicate")
    assert caught.value.hint == "commands:\n" + help_text()
    assert all(f"/{name}" in help_text() for name in ("rewind", "fork", "summarize", "undo"))


def test_only_slash_words_are_commands() -> None:
    assert is_command("/rewind 2")
    assert not is_command("/etc/hosts looks odd, why?")  # a path is a prompt
    assert not is_command("//not a command")
    assert not is_command("please /rewind")


def test_the_docs_show_a_real_transcript_with_a_rewind() -> None:
    """docs/chat.md promises a captured session; the placeholder once shipped instead."""
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "chat.md").read_text()
    section = docs.split("## A session, captured from a terminal", 1)[1].split("## Keys", 1)[0]
    assert "TRANSCRIPT" not in section
    for line in (
        "/help for commands · Esc Esc on an empty prompt to rewind · Ctrl-D to leave",
        "Go back to which turn? (each is the instant just before its prompt)",
        "Go ahead? [y/N] y",
        "rewound to just before turn 1 (code)",
    ):
        assert line in section
