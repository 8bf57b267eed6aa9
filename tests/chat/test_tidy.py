"""Rough edges of going back a new user met: the chat's label, emptied directories, /undo
after a summary (each through the real engine, or ``tilth chat`` with piped lines)."""

from __future__ import annotations

from pathlib import Path

from tests.chat.support import start
from tests.chat.test_chat_scripted import run_chat
from tilth.chat.session import first_prompt
from tilth.model import reply, tool_call


def test_the_chat_keeps_its_first_prompt_as_its_label_after_a_summary(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    engine, _ = start(
        tmp_path, work, [reply("One."), reply("Two."), reply("Three."), reply("A summary.")]
    )
    try:
        for prompt in ("the first prompt\nwith a second line", "the second", "the third"):
            engine.send(prompt)
        assert first_prompt(engine.session) == "the first prompt"
        engine.summarize(3, "up-to")
        assert "[Summary of" in str(engine.thread.messages()[1]["content"])
        assert first_prompt(engine.session) == "the first prompt"
    finally:
        engine.close()


def test_a_rewind_removes_the_directories_it_empties(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "kept").mkdir(parents=True)
    (work / "kept" / "old.txt").write_text("mine\n")
    deep = tool_call("write_file", path="new/deeper/still/made.py", content="x = 1\n")
    beside = tool_call("write_file", path="kept/sub/made.txt", content="y\n")
    engine, _ = start(tmp_path, work, [reply(None, deep), reply(None, beside), reply("Done.")])
    try:
        engine.send("make things")
        assert (work / "new" / "deeper" / "still" / "made.py").is_file()
        engine.rewind(1, "both")
    finally:
        engine.close()
    assert sorted(p.relative_to(work).as_posix() for p in work.rglob("*")) == [
        "kept",
        "kept/old.txt",
    ]


def test_undo_after_a_summary_names_what_it_undoes_and_that_the_summary_goes(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    made = tool_call("write_file", path="a.txt", content="a\n")
    done = run_chat(
        tmp_path,
        "work",
        ["make a", "say more", "/rewind 2 conversation", "say more", "/summarize 2 up-to", "/undo"],
        [reply(None, made), reply("Made."), reply("More."), reply("More again."), reply("Sum.")],
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "This cannot be undone with /undo" in out
    assert "/undo undoes the rewind to just before turn 2 (made at" in out
    assert "the summary made since then goes too" in out
    assert "undone: the rewind to just before turn 2" in out
