"""``tilth chat`` with stdin not a terminal: one prompt or command per line, exit 0 at the end."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.chat.support import tree_hash
from tests.chat.tty import chat_env, server_for
from tests.conftest import make_repo
from tests.sessionview import SessionView
from tests.warm_cli import shared
from tilth.model import error, reply, tool_call

WRITE = tool_call("write_file", path="hello.py", content="print('hello')\n")
BASH = tool_call("bash", command="echo made > made.txt")
STORY_REPLIES = [
    reply("Writing.", WRITE),
    reply("Wrote hello.py."),
    reply(None, BASH),
    reply("Made made.txt."),
    reply(None, BASH),
    reply("Made it again."),
    reply("Earlier: hello.py was written."),
]
STORY = [
    "write hello",
    "make a file",
    "/checkpoints",
    "/rewind 1 code",
    "/rewind 2 conversation",
    "make a file",
    "/fork 2",
    "/summarize 2 up-to",
    "/rewind 1 both",
    "/undo",
]


def run_chat(
    tmp_path: Path,
    directory: str,
    lines: list[str],
    replies: list,
    **env: str,  # type: ignore[type-arg]
) -> subprocess.CompletedProcess[str]:
    server = server_for(replies)
    try:
        return shared().run(
            ["chat", directory],
            input_text="".join(line + "\n" for line in lines),
            cwd=tmp_path,
            env=chat_env(tmp_path / "home", server, **env),
            timeout=120,
        )
    finally:
        server.stop()


def check_story(result: subprocess.CompletedProcess[str], work: Path, home: Path) -> None:
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "> write hello" in out and "changed hello.py" in out and "changed made.txt" in out
    assert "1  " in out and "write hello  [hello.py]" in out  # /checkpoints
    assert "rewound to just before turn 1 (code): 0 file(s) restored, 2 deleted" in out
    assert "prompt of turn 2: make a file" in out
    assert "forked into session" in out and "files: keep.txt" in out
    assert "summarized 4 message(s) up to turn 2" in out
    assert "rewound to just before turn 1 (both)" in out
    assert "prompt of turn 1: write hello" in out
    assert "/undo undoes the rewind to just before turn 1" in out
    assert "undone: the rewind to just before turn 1" in out
    # Each plan says how to undo it in a chat, and the undo's own plan does not claim the
    # conversation is left alone (it comes back from the undo archive).
    assert "`/undo` returns to it" in out and "tilth rewind --undo" not in out
    undo_plan = out.split("rewound to just before turn 1 (both)")[-1].split("undone: the rewind")[0]
    assert "restored from the undo archive" in undo_plan
    assert "conversation dropped: nothing" not in undo_plan
    assert "error" not in result.stderr.lower(), result.stderr
    # /undo took back the last rewind: made.txt (made again by the re-sent turn 2) is back.
    assert sorted(p for p in os.listdir(work) if p != ".git") == ["keep.txt", "made.txt"]
    sessions = [SessionView.at(p).record().to_dict() for p in (home / "sessions").iterdir()]
    mine = [s for s in sessions if s["workspace"] == str(work.resolve())]
    assert len(mine) == 1 and mine[0]["kind"] == "chat" and mine[0]["status"] == "all_done"


def test_the_story_scripted_in_a_directory_without_git(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "keep.txt").write_text("mine\n")
    result = run_chat(tmp_path, "work", STORY, STORY_REPLIES)
    check_story(result, work, tmp_path / "home")


def test_the_story_scripted_in_a_git_repository_leaves_git_byte_identical(tmp_path: Path) -> None:
    work = make_repo(tmp_path / "work", {"keep.txt": "mine\n"})
    # A stale index (an edit not staged) is what `git status` would rewrite.
    (work / "keep.txt").write_text("mine\n")
    os.utime(work / "keep.txt", (1_000_000_000, 1_000_000_000))
    before = tree_hash(work / ".git")
    result = run_chat(tmp_path, "work", STORY, STORY_REPLIES)
    check_story(result, work, tmp_path / "home")
    assert tree_hash(work / ".git") == before


def test_bad_input_scripted_is_error_lines_and_exit_0(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    lines = [
        "/bogus",
        "/rewind 99",
        "hello",
        "/rewind",
        "/summarize 1",
        "/fork x",
        "/rewind 1 sideways",
        "this turn fails",
        "/checkpoints",
        "y" * (1 << 20),
        "still here?",
    ]
    replies = [reply("Hello."), error(500, "the provider fell over"), reply("Yes.")]
    result = run_chat(tmp_path, "work", lines, replies)
    assert result.returncode == 0, result.stderr
    err = result.stderr
    assert "error: unknown command /bogus" in err
    assert "error: there are no turns to go back to yet" in err
    assert "error: /rewind needs its arguments when stdin is not a terminal" in err
    assert "error: /summarize needs its arguments when stdin is not a terminal" in err
    assert "error: 'x' is not a turn number" in err
    assert "error: 'sideways' is not a scope" in err
    assert "the provider fell over" in err  # the turn's own error, on stderr
    assert "the provider fell over" not in result.stdout
    assert "error: the prompt is 1,048,576 characters" in err
    assert "Traceback" not in err
    # The chat went on after every error: the last prompt got its answer as turn 3.
    assert result.stdout.rstrip().endswith("Yes.\n── turn 3 · 30 tokens (15 this turn)")


def test_a_missing_directory_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = run_chat(tmp_path, "nowhere", ["hello"], [])
    assert result.returncode == 2
    assert result.stderr.splitlines()[0].startswith("error: ")
    assert "nowhere does not exist" in result.stderr
    assert not (tmp_path / "home" / "sessions").exists()


def test_a_directory_that_is_not_writable_is_one_line_and_exit_2(
    tmp_path: Path, read_only_dir: Path
) -> None:
    result = run_chat(tmp_path, str(read_only_dir), ["hello"], [])
    assert result.returncode == 2
    assert "is not writable" in result.stderr
    assert len([ln for ln in result.stderr.splitlines() if ln.startswith("error:")]) == 1


def test_resume_continues_the_chat_where_it_stopped(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    first = run_chat(tmp_path, "work", ["write hello"], STORY_REPLIES[:2])
    assert first.returncode == 0, first.stderr
    session_id = first.stderr.split("session ", 1)[1].split()[0]
    server = server_for([reply("Still here, and hello.py is too.")])
    try:
        env = chat_env(tmp_path / "home", server)
        again = shared().run(
            ["chat", "--resume", session_id],
            input_text="what did you write?\n/checkpoints\n",
            cwd=tmp_path,
            env=env,
            timeout=120,
        )
        both = shared().run(
            ["chat", "--resume", session_id, "work"], cwd=tmp_path, env=env, timeout=120
        )
        request = server.requests[0]["body"]["messages"]
    finally:
        server.stop()
    assert again.returncode == 0, again.stderr
    assert "last prompt (turn 1): write hello" in again.stderr
    assert "── turn 2 ·" in again.stdout
    assert "write hello  [hello.py]" in again.stdout and "what did you write?  [" in again.stdout
    assert [m["role"] for m in request][:2] == ["system", "user"]
    assert request[1]["content"] == "write hello"
    assert both.returncode == 2 and "not both" in both.stderr


def test_summarize_shows_the_summary_that_now_stands_for_the_turns(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    summary = "The person asked for a greeting; the model said hi and wrote nothing."
    done = run_chat(
        tmp_path,
        "work",
        ["say hi", "/summarize 1 from"],
        [reply("Hi!"), reply(summary)],
    )
    assert done.returncode == 0, done.stderr
    shown = done.stdout.split("summarized 2 message(s) from turn 1", 1)
    assert len(shown) == 2, done.stdout
    assert summary in shown[1]
