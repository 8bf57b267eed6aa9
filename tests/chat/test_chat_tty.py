"""``tilth chat`` on a real pseudo-terminal: the Done-when story and bad input."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.chat.tty import TtyChat, chat_env, server_for
from tests.sessionview import SessionView
from tilth.chat import MAX_PROMPT_CHARS
from tilth.model import error, reply, tool_call
from tilth.model.script import stall

pytestmark = pytest.mark.timeout(180)

WRITE = tool_call("write_file", path="hello.py", content="print('hello')\n")
BASH = tool_call("bash", command="echo made > made.txt")


def _thread(home: Path, work: Path) -> list[dict]:  # type: ignore[type-arg]
    """The conversation of the chat working in ``work`` (a fork works elsewhere)."""
    sessions = [SessionView.at(p) for p in (home / "sessions").iterdir()]
    [session] = [s for s in sessions if s.record().workspace == str(work.resolve())]
    return session.thread("chat")


def test_the_whole_story_through_a_terminal(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "keep.txt").write_text("mine\n")
    home = tmp_path / "home"
    server = server_for(
        [
            reply("I'll write **hello.py**.", WRITE),
            reply("Wrote `hello.py`."),
            reply(None, BASH),
            reply("Made `made.txt`."),
            reply(None, BASH),
            reply("Made it again."),
            reply("The person asked for hello.py; it was written."),
        ]
    )
    chat = TtyChat(["work"], chat_env(home, server), tmp_path, tmp_path / "tty.log")
    try:
        chat.prompt()
        chat.send("write hello")
        chat.expect(r"changed hello\.py")
        chat.prompt()
        chat.send("make a file")
        chat.expect(r"changed made\.txt")
        chat.prompt()
        assert sorted(os.listdir(work)) == ["hello.py", "keep.txt", "made.txt"]

        # Esc Esc -> the first turn -> code: both files go, the conversation stays.
        chat.esc_esc()
        chat.pick_turn("1")
        chat.pick_action("3")
        chat.expect(r"delete\s+hello\.py")
        chat.answer("Go ahead? [y/N]", "y")
        chat.expect(r"rewound to just before turn 1 \(code\): 0 file\(s\) restored, 2 deleted")
        chat.prompt()
        assert sorted(os.listdir(work)) == ["keep.txt"]
        assert [m["role"] for m in _thread(home, work)].count("user") == 3  # two prompts + the note

        # Esc Esc -> the second turn -> conversation: its prompt is back in the input box.
        chat.esc_esc()
        chat.pick_turn("2")
        chat.pick_action("2")
        chat.answer("Go ahead? [y/N]", "y")
        chat.expect_exact("the prompt of turn 2 is back in the input box")
        chat.expect(r"›[^\n]*make a file")
        chat.send("")  # send it as it stands: the same prompt runs again
        chat.expect(r"turn 2 · .*changed made\.txt")
        chat.prompt()

        # Fork from here: a new session id and the fork's directory state.
        chat.esc_esc()
        chat.pick_turn("2")
        chat.pick_action("4")
        chat.answer("Go ahead? [y/N]", "y")
        match = chat.expect(r"forked into session (\d{8}-\d{6}-[0-9a-f]{6})")
        fork_id = match.group(1)
        chat.expect_exact("files: keep.txt")
        chat.prompt()
        fork_dir = home / "sessions" / fork_id / "workspace"
        assert sorted(os.listdir(fork_dir)) == ["keep.txt"]

        # Summarize up to here, then a later rewind still works.
        chat.esc_esc()
        chat.pick_turn("2")
        chat.pick_action("6")
        chat.answer("Go ahead? [y/N]", "y")
        chat.expect(r"summarized \d+ message\(s\) up to turn 2")
        chat.prompt()
        assert "[Summary of" in _thread(home, work)[1]["content"]
        chat.esc_esc()
        chat.pick_turn("1")
        chat.pick_action("1")
        chat.answer("Go ahead? [y/N]", "y")
        chat.expect(r"rewound to just before turn 1 \(both\)")
        chat.expect(r"›[^\n]*write hello")
        assert sorted(os.listdir(work)) == ["keep.txt"]
        assert [m["role"] for m in _thread(home, work)] == ["system"]
        chat.child.send("\x15")  # Ctrl-U: clear the restored prompt

        # /undo returns to the state before the last go-back.
        chat.send("/undo")
        chat.expect_exact("/undo undoes the rewind to just before turn 1")
        chat.expect(r"restore\s+made\.txt")
        chat.answer("Go ahead? [y/N]", "y")
        chat.expect_exact("undone: the rewind to just before turn 1")
        chat.prompt()
        assert sorted(os.listdir(work)) == ["keep.txt", "made.txt"]
        assert "[Summary of" in _thread(home, work)[1]["content"]
        assert chat.leave() == 0
    finally:
        chat.close()
        server.stop()


def test_bad_input_on_a_terminal_is_a_clear_line_and_nothing_is_lost(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"
    risky = tool_call("bash", command="chmod -R u+w . && echo ran > ran.txt")
    server = server_for(
        [
            reply("Writing.", WRITE),
            error(500, "the provider fell over"),
            # Quiet far longer than a Ctrl-C can take to land: a 2 s stall let a Ctrl-C
            # slowed by a busy machine come as the reply ended, and nothing was cancelled.
            stall(60.0, reply("streaming words " * 40), after=2),
            reply(None, risky),
            reply("Ran it."),
            # Cancelled at its question: no further model call, so the next turn gets the next.
            reply(None, tool_call("bash", command="chmod -R u+w . && echo no > no.txt")),
            reply("Still here."),
        ]
    )
    chat = TtyChat(["work"], chat_env(home, server), tmp_path, tmp_path / "tty.log")
    try:
        chat.prompt()
        chat.send("/nonsense")
        chat.expect_exact("unknown command /nonsense")
        chat.expect_exact("/rewind [N [code|conversation|both]]")
        chat.prompt()
        chat.send("/rewind 99")
        chat.expect_exact("there are no turns to go back to yet")
        chat.prompt()
        # A model error in the middle of a turn: the turn stops, the chat goes on.
        chat.send("write it")
        chat.expect(r"error: .*the provider fell over")
        chat.expect_exact("the chat goes on")
        chat.prompt()
        assert (work / "hello.py").exists()
        # Ctrl-C in the middle of a streamed reply: the turn is cancelled, not the chat.
        chat.send("talk slowly")
        chat.expect_exact("streaming words")  # the first pieces are on the screen
        chat.child.send("\x03")
        chat.expect_exact("cancelling the turn")
        chat.expect_exact("cancelled: the turn was interrupted")
        chat.prompt()
        assert "streaming words" not in json.dumps(_thread(home, work))  # the partial reply
        # A risky command asks first.
        chat.send("run the risky thing")
        chat.answer("Run it? [y/N]", "y")
        chat.expect(r"Ran it\.")
        chat.prompt()
        assert (work / "ran.txt").read_text() == "ran\n"
        # Ctrl-C at that question refuses the command and cancels the whole turn.
        chat.send("run another risky thing")
        chat.expect_exact("Run it? [y/N]")
        chat.child.send("\x03")
        chat.expect_exact("cancelling the turn")
        chat.prompt()
        assert not (work / "no.txt").exists()
        # A prompt one character over the limit (pasted) is refused with the reason; it
        # stays in the history.
        chat.child.send("\x1b[200~" + "y" * (MAX_PROMPT_CHARS + 1) + "\x1b[201~")
        chat.send("")
        chat.expect_exact(f"the prompt is {MAX_PROMPT_CHARS + 1:,} characters", timeout=90)
        chat.expect_exact("Nothing was sent")
        chat.prompt()
        chat.send("/rewind 1 everything")
        chat.expect_exact("is not a scope")
        chat.prompt()
        chat.child.send("still\x1b\r")  # Esc Enter: a second line in the same prompt
        chat.send("there?")
        chat.expect(r"Still here\.")
        chat.prompt()
        assert chat.leave() == 0
        thread = _thread(home, work)
        assert thread[-2]["content"] == "still\nthere?"
        assert thread[-1]["content"] == "Still here."
    finally:
        chat.close()
        server.stop()


def test_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    server = server_for([])
    chat = TtyChat(["nowhere"], chat_env(home, server), tmp_path)
    try:
        chat.expect(r"error: .*nowhere does not exist")
        chat.child.expect("\n")
        chat.child.expect(r"hint: ")
        chat.child.expect(__import__("pexpect").EOF)
        chat.child.close()
        assert chat.child.exitstatus == 2
        assert "Traceback" not in re.sub(r"\s+", " ", str(chat.child.before))
    finally:
        chat.close()
        server.stop()
