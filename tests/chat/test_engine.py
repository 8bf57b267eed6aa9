"""The chat engine's turns: events, checkpoints, capture without git, errors and cancels."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.chat.support import chat_settings, start, tree_hash
from tests.conftest import make_repo
from tilth.chat import CancelToken, ChatEngine, ChatEvent
from tilth.errors import UsageError
from tilth.model import Script, ScriptedModel, error, reply, tool_call

WRITE = tool_call("write_file", path="hello.py", content="print('hi')\n")
BASH = tool_call("bash", command="echo made > made.txt")


def test_a_new_chat_is_a_session_of_kind_chat(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    engine, _ = start(tmp_path, work, [])
    record = json.loads(engine.session.checkpoint_path.read_text())
    assert record["kind"] == "chat"
    assert record["workspace"] == str(work.resolve())
    assert record["branch"] is None
    assert record["status"] == "running"
    assert not (engine.session.dir / "prd.json").exists()
    first = engine.thread.read()[0]
    assert first.message["role"] == "system"
    engine.close()
    assert json.loads(engine.session.checkpoint_path.read_text())["status"] == "all_done"


def test_a_write_turn_streams_events_and_records_one_checkpoint(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    replies = [reply("Writing it.", WRITE), reply("Done: **hello.py**.")]
    engine, events = start(tmp_path, work, replies)
    result = engine.send("write hello.py please")
    assert (work / "hello.py").read_text() == "print('hi')\n"
    assert result["outcome"] == "done"
    assert result["files_changed"] == ["hello.py"]
    types = events.types()
    assert types[0] == "turn_started" and types[-1] == "turn_finished"
    assert types.index("tool_started") < types.index("tool_finished")
    assert events.text() == "Writing it.Done: **hello.py**."
    finished = events.of("tool_finished")[0]
    assert finished["ok"] and "+print('hi')" in finished["diff"]
    assert events.of("tool_started")[0]["summary"] == "write_file hello.py (1 line)"
    [turn] = engine.turns()
    assert (turn.turn, turn.label, turn.actor) == (1, "write hello.py please", "chat")
    assert turn.head.startswith("manifest:")
    assert turn.files_changed == ["hello.py"]
    # The checkpoint is the instant before the prompt: the file did not exist yet.
    assert "hello.py" not in turn.overlay
    roles = [m.message["role"] for m in engine.thread.read()]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert ChatEvent("text", {"text": "x"}).to_dict() == {"type": "text", "text": "x"}


def test_bash_changes_are_captured_like_edits(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "old.txt").write_text("old\n")
    engine, _ = start(
        tmp_path,
        work,
        [
            reply(None, BASH),
            reply("made"),
            reply(None, tool_call("bash", command="rm old.txt")),
            reply("removed"),
            reply("nothing to do"),
        ],
    )
    first = engine.send("make a file")
    assert first["files_changed"] == ["made.txt"]
    assert any("bash may have had effects" in gap for gap in first["gaps"])
    assert engine.send("remove old.txt")["files_changed"] == ["old.txt"]
    engine.send("and now?")
    third = engine.turns()[2]
    # The third turn's checkpoint holds both bash changes: made.txt created, old.txt gone.
    assert third.overlay["old.txt"] is None
    assert third.overlay["made.txt"]


def test_no_git_command_touches_a_repositorys_git_dir(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "# r\n", "src/app.py": "x = 1\n"})
    (repo / "README.md").write_text("# edited but not staged\n")  # a stale index entry
    before = tree_hash(repo / ".git")
    engine, _ = start(
        tmp_path,
        repo,
        [
            reply(None, WRITE),
            reply("ok"),
            reply(None, tool_call("bash", command="echo y > src/new.py && rm src/app.py")),
            reply("ok"),
        ],
    )
    engine.send("write")
    engine.send("shell")
    engine.close()
    assert tree_hash(repo / ".git") == before
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True)
    assert status.returncode == 0  # still a healthy repository (checked after the hash)


def test_a_model_error_mid_turn_ends_the_turn_and_the_chat_goes_on(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    engine, events = start(
        tmp_path, work, [reply("first", WRITE), error(500, "upstream broke"), reply("back again")]
    )
    result = engine.send("write it")
    assert result["outcome"] == "error"
    assert "upstream broke" in (result["error"] or "")
    assert result["files_changed"] == ["hello.py"]  # what the turn did before is recorded
    # Every tool call of the thread has its answer, so the next request is valid.
    roles = [m.message["role"] for m in engine.thread.read()]
    assert roles[-2:] == ["assistant", "tool"]
    assert engine.send("try again")["outcome"] == "done"
    assert events.of("turn_finished")[-1]["turn"] == 2


def test_cancel_while_the_reply_streams_drops_the_reply(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    token = CancelToken()
    seen: list[str] = []

    def listener(event: ChatEvent) -> None:
        if event.type == "text":
            seen.append(event.data["text"])
            if len(seen) == 2:
                token.cancel()

    model = ScriptedModel(Script({"*": [reply("one two three four five"), reply("fine")]}))
    engine = ChatEngine.start(
        chat_settings(tmp_path), work, model, listener=listener, index_in_background=False
    )
    result = engine.send("talk", token)
    assert result["outcome"] == "cancelled"
    assert seen == ["one ", "two "]
    messages = engine.thread.read()
    assert [m.message["role"] for m in messages] == ["system", "user", "user"]
    assert messages[-1].meta["kind"] == "interrupted"
    assert engine.send("again")["outcome"] == "done"


def test_cancel_between_tool_calls_answers_the_rest(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    token = CancelToken()

    def listener(event: ChatEvent) -> None:
        if event.type == "tool_finished":
            token.cancel()

    two = reply(None, WRITE, tool_call("write_file", path="second.py", content="y\n"))
    model = ScriptedModel(Script({"*": [two]}))
    engine = ChatEngine.start(
        chat_settings(tmp_path), work, model, listener=listener, index_in_background=False
    )
    assert engine.send("two files", token)["outcome"] == "cancelled"
    assert (work / "hello.py").exists() and not (work / "second.py").exists()
    tools = [m.message for m in engine.thread.read() if m.message["role"] == "tool"]
    assert len(tools) == 2 and "cancelled" in tools[1]["content"]


def test_a_risky_command_runs_only_when_the_confirm_callback_approves(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    risky = tool_call("bash", command="chmod -R u+w . && echo ran > ran.txt")
    asked: list[tuple[str, str]] = []
    engine, events = start(tmp_path, work, [reply(None, risky), reply("refused")])
    engine.send("do it")
    assert not (work / "ran.txt").exists()
    assert events.of("tool_finished")[0]["blocked"]
    assert events.of("confirm_asked")[0]["approved"] is False

    def approve(command: str, reason: str) -> bool:
        asked.append((command, reason))
        return True

    engine2, _ = start(tmp_path, work, [reply(None, risky), reply("ran")], confirm=approve)
    engine2.send("do it")
    assert (work / "ran.txt").read_text() == "ran\n"
    assert asked and "chmod" in asked[0][1]


def test_a_huge_prompt_is_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    engine, _ = start(tmp_path, work, [reply("never")])
    with pytest.raises(UsageError, match="1,048,576 characters"):
        engine.send("x" * (1 << 20))
    with pytest.raises(UsageError, match="empty"):
        engine.send("   ")
    assert engine.turns() == []
    assert [m.message["role"] for m in engine.thread.read()] == ["system"]


def test_a_missing_or_unwritable_directory_is_refused(tmp_path: Path, read_only_dir: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        start(tmp_path, tmp_path / "nope", [])
    with pytest.raises(UsageError, match="not writable"):
        start(tmp_path, read_only_dir, [])
    assert not (tmp_path / "home" / "sessions").exists()


def test_resume_continues_the_thread_and_the_turn_numbers(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    engine, _ = start(tmp_path, work, [reply(None, WRITE), reply("one")])
    engine.send("first")
    engine.close()
    model = ScriptedModel(Script({"*": [reply("two")]}))
    again = ChatEngine.resume(chat_settings(tmp_path), engine.id, model, index_in_background=False)
    assert again.send("second")["turn"] == 2
    request = model.requests[0]["messages"]
    assert [m["role"] for m in request][:3] == ["system", "user", "assistant"]
    assert [t.label for t in again.turns()] == ["first", "second"]


def test_resuming_a_chat_whose_directory_moved_says_where_it_belongs(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    engine, _ = start(tmp_path, work, [reply("one")])
    engine.send("first")
    engine.close()
    work.rename(tmp_path / "moved")
    model = ScriptedModel(Script({"*": [reply("never")]}))
    with pytest.raises(UsageError) as info:
        ChatEngine.resume(chat_settings(tmp_path), engine.id, model, index_in_background=False)
    assert f"chat session {engine.id} works in" in info.value.message
    assert info.value.hint is not None and "tilth chat [DIR]" not in info.value.hint
    assert "move the directory back to" in info.value.hint


def test_sessions_lists_a_chat_with_its_kind_and_run_ignores_it(tmp_path: Path) -> None:
    from tests.conftest import run_cli
    from tilth.session.discovery import sessions_for

    repo = make_repo(tmp_path / "repo")
    engine, _ = start(tmp_path, repo, [reply("hi")])
    engine.send("hello")
    settings = engine.settings
    env = {"TILTH_HOME": str(settings.home)}
    result = run_cli("sessions", env=env)
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith(engine.id))
    # Between turns nobody drives it: it shows as stopped (resumable), not running.
    assert row.split()[1:3] == ["chat", "stopped"]
    listed = json.loads(run_cli("sessions", "--json", env=env).stdout)
    assert (listed[0]["kind"], listed[0]["status"]) == ("chat", "running")
    engine.close()
    listed = json.loads(run_cli("sessions", "--json", env=env).stdout)
    assert (listed[0]["status"], listed[0]["last_stop"]) == ("all_done", "all_done")
    # `tilth run` looks for the repository's runs: a chat there is not one.
    assert sessions_for(settings.sessions_dir, repo, ("running",)) == []
    assert [s.id for s in sessions_for(settings.sessions_dir, repo, kind="chat")] == [engine.id]


def test_an_unreadable_file_is_a_gap_not_a_failure(tmp_path: Path) -> None:
    import os
    import subprocess

    work = tmp_path / "work"
    work.mkdir()
    secret = work / "secret.bin"
    secret.write_text("no\n")
    mounted = False
    if os.geteuid() == 0:
        # Root reads any file: stand a file in whose every read fails (EIO) instead.
        source = f"/proc/{os.getpid()}/mem"
        mounted = subprocess.run(["mount", "--bind", source, str(secret)]).returncode == 0
        if not mounted:
            pytest.skip("cannot make an unreadable file here")
    else:
        secret.chmod(0o000)
    try:
        with pytest.raises(OSError):
            secret.read_bytes()
        engine, _ = start(tmp_path, work, [reply("fine")])
        assert engine.send("hello")["outcome"] == "done"
        assert any("unreadable, not captured: secret.bin" in g for g in engine.capture.start_gaps)
        engine.close()
    finally:
        if mounted:
            subprocess.run(["umount", str(secret)])
        else:
            secret.chmod(0o600)


def test_bash_runs_in_the_workers_sandbox_with_the_directory_writable(tmp_path: Path) -> None:
    from tilth.tools.sandbox import probe

    if not probe()[0]:
        pytest.skip("bubblewrap cannot make a sandbox here")
    repo = make_repo(tmp_path / "repo")
    before = tree_hash(repo / ".git")
    command = (
        "echo in > inside.txt; echo out > ../outside.txt; echo x > .git/evil; "
        f"ls {tmp_path / 'home'}/sessions/*/checkpoint.json 2>/dev/null | wc -l"
    )
    engine, events = start(tmp_path, repo, [reply(None, tool_call("bash", command=command))])
    engine.send("try to escape")
    assert engine.sandbox is not None and engine.sandbox_warning() is None
    assert (repo / "inside.txt").read_text() == "in\n"
    assert not (tmp_path / "outside.txt").exists()
    assert not (repo / ".git" / "evil").exists()
    assert tree_hash(repo / ".git") == before
    result = events.of("tool_finished")[0]["result"]
    assert result.splitlines()[-2].strip() == "0"  # the session files are hidden from it


def test_the_home_directory_and_the_root_are_refused(tmp_path: Path) -> None:
    from pathlib import Path as P

    for where in (P.home(), P("/")):
        with pytest.raises(UsageError, match="too broad a place for a chat"):
            start(tmp_path, where, [])
