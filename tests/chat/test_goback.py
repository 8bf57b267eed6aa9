"""Going back in a chat: rewind, fork and summarize through the timeline controller."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.chat.support import chat_settings, start, tree_hash
from tests.conftest import make_repo, run_cli
from tests.sessionview import SessionView
from tilth.chat import ChatEngine
from tilth.errors import Aborted, UsageError
from tilth.model import Script, ScriptedModel, reply, tool_call

WRITE = tool_call("write_file", path="hello.py", content="print('hi')\n")
BASH = tool_call("bash", command="echo made > made.txt")


def story(tmp_path: Path, directory: Path | None = None, extra: list | None = None):  # type: ignore[no-untyped-def]
    """Turn 1 writes hello.py with write_file, turn 2 makes made.txt with bash."""
    work = directory or tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "keep.txt").write_text("mine\n")
    replies = [reply("writing", WRITE), reply("wrote it"), reply(None, BASH), reply("made it")]
    engine, events = start(tmp_path, work, replies + (extra or []))
    engine.send("write hello")
    engine.send("make a file")
    return engine, events, work


def test_code_rewind_to_the_first_turn_removes_both_files_and_keeps_the_talk(
    tmp_path: Path,
) -> None:
    engine, events, work = story(tmp_path)
    before = len(engine.history())
    plan = engine.plan_rewind(1, "code")
    assert plan.files == [("delete", "hello.py"), ("delete", "made.txt")]
    assert "no git" in plan.render()
    result = engine.rewind(1, "code")
    assert sorted(os.listdir(work)) == ["keep.txt"]
    assert result["prompt"] is None
    history = engine.history()
    assert len(history) == before + 1 and history[-1]["kind"] == "rewind_note"
    assert len(engine.turns()) == 2  # code only: the turns stay
    assert events.of("rewound")[-1]["scope"] == "code"


def test_conversation_rewind_gives_the_prompt_back_and_keeps_the_files(tmp_path: Path) -> None:
    engine, _, work = story(tmp_path)
    result = engine.rewind(2, "conversation")
    assert result["prompt"] == "make a file"
    assert (work / "made.txt").exists() and (work / "hello.py").exists()
    assert [t.label for t in engine.turns()] == ["write hello"]
    assert [h["role"] for h in engine.history()] == ["user", "assistant", "tool", "assistant"]


def test_both_returns_to_the_instant_before_the_turn_and_the_chat_goes_on(tmp_path: Path) -> None:
    engine, _, work = story(tmp_path, extra=[reply("again")])
    result = engine.rewind(1, "both")
    assert result["prompt"] == "write hello"
    assert sorted(os.listdir(work)) == ["keep.txt"]
    assert engine.history() == [] and engine.turns() == []
    assert engine.send("a new first turn")["turn"] == 1


def test_a_file_edited_outside_the_chat_is_kept_unless_forced(tmp_path: Path) -> None:
    engine, _, work = story(tmp_path)
    (work / "hello.py").write_text("print('my own edit')\n")
    plan = engine.plan_rewind(1, "code")
    assert plan.conflicts == ["hello.py"]
    assert plan.files == [("delete", "made.txt")]
    assert "kept as they are" in plan.render()
    engine.rewind(1, "code")
    assert (work / "hello.py").read_text() == "print('my own edit')\n"
    assert not (work / "made.txt").exists()
    forced = engine.plan_rewind(1, "code", force=True)
    assert forced.files == [("delete", "hello.py")]


def test_a_declined_plan_changes_nothing(tmp_path: Path) -> None:
    engine, _, work = story(tmp_path)
    with pytest.raises(Aborted):
        engine.rewind(1, "both", show=lambda plan: False)
    assert (work / "hello.py").exists() and len(engine.turns()) == 2


def test_a_turn_that_does_not_exist_is_a_clear_error(tmp_path: Path) -> None:
    engine, _, _ = story(tmp_path)
    with pytest.raises(UsageError, match="there is no turn 99; the turns are 1-2"):
        engine.plan_rewind(99)
    with pytest.raises(UsageError, match="scope"):
        engine.plan_rewind(1, "everything")
    engine.rewind(2, "both", show=lambda plan: True)
    with pytest.raises(UsageError, match=r"there is no turn 5; there is only turn 1$"):
        engine.plan_rewind(5)


def test_fork_from_a_turn_makes_a_chat_in_its_own_directory(tmp_path: Path) -> None:
    engine, events, work = story(tmp_path)
    result = engine.fork(2)
    child_dir = Path(result["directory"])
    assert sorted(os.listdir(child_dir)) == ["hello.py", "keep.txt"]
    assert sorted(os.listdir(work)) == ["hello.py", "keep.txt", "made.txt"]  # untouched
    record = SessionView.at(child_dir.parent).record().to_dict()
    assert record["kind"] == "chat" and record["workspace"] == str(child_dir)
    assert record["parent_session"] == engine.id
    model = ScriptedModel(Script({"*": [reply("in the fork")]}))
    child = ChatEngine.resume(
        engine.settings, result["session_id"], model, index_in_background=False
    )
    assert [t.label for t in child.turns()] == ["write hello"]
    assert child.send("go on")["turn"] == 2
    assert [m["role"] for m in model.requests[0]["messages"]] == [
        "system", "user", "assistant", "tool", "assistant", "user",
    ]  # fmt: skip
    assert events.of("forked")[0]["session_id"] == child.id


def test_summarize_up_to_a_turn_then_rewinding_still_works(tmp_path: Path) -> None:
    engine, _, work = story(tmp_path, extra=[reply("They wrote hello.py."), reply("ok")])
    result = engine.summarize(2, "up-to")
    assert result["replaced"] == 4
    roles = [h["role"] for h in engine.history()]
    assert roles[0] == "user" and engine.history()[0]["kind"] == "summary"
    assert roles[1:] == ["user", "assistant", "tool", "assistant"]
    with pytest.raises(UsageError, match="nothing to summarize"):
        engine.summarize(1, "up-to")  # only the system prompt comes before turn 1
    engine.send("third")
    back = engine.rewind(1, "both")
    assert back["prompt"] == "write hello"
    assert sorted(os.listdir(work)) == ["keep.txt"]


def test_rewinds_in_a_git_repository_leave_git_byte_identical(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "# r\n"})
    before = tree_hash(repo / ".git")
    engine, _, _ = story(tmp_path, directory=repo)
    engine.rewind(1, "code")
    engine.rewind(2, "conversation")
    engine.fork(1)
    engine.close()
    assert tree_hash(repo / ".git") == before
    assert sorted(os.listdir(repo)) == [".git", "README.md", "keep.txt"]


def test_retention_keeps_what_a_chat_checkpoint_needs(tmp_path: Path) -> None:
    from tilth.timeline.record.retention import collect

    engine, _, work = story(tmp_path)
    report = collect(engine.settings, grace_seconds=0)
    assert report.blobs_kept > 0
    engine.rewind(1, "code")
    assert sorted(os.listdir(work)) == ["keep.txt"]
    engine.rewind(2, "code")  # back to the state before turn 2: hello.py again
    assert (work / "hello.py").read_text() == "print('hi')\n"


def test_the_command_line_verbs_work_on_a_chat_session(tmp_path: Path) -> None:
    engine, _, work = story(tmp_path)
    engine.close()
    env = {"TILTH_HOME": str(engine.settings.home)}
    listed = run_cli("checkpoints", engine.id, "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["label"], r["files_changed"]) for r in rows] == [
        ("write hello", ["hello.py"]),
        ("make a file", ["made.txt"]),
    ]
    dry = run_cli(
        "rewind", engine.id, "--to", rows[0]["id"], "--scope", "code", "--dry-run", env=env
    )
    assert dry.returncode == 0, dry.stderr
    assert "delete  hello.py" in dry.stdout and (work / "hello.py").exists()
    assert "tasks" not in dry.stdout  # a chat has none
    done = run_cli("rewind", engine.id, "--to", rows[0]["id"], "--scope", "code", "-y", env=env)
    assert done.returncode == 0, done.stderr
    assert f"continue the chat with: tilth chat --resume {engine.id}" in done.stdout
    assert "tilth resume" not in done.stdout
    assert sorted(os.listdir(work)) == ["keep.txt"]
    undo = run_cli("rewind", "--undo", engine.id, "-y", env=env)
    assert undo.returncode == 0, undo.stderr
    assert sorted(os.listdir(work)) == ["hello.py", "keep.txt", "made.txt"]
    fork = run_cli("fork", engine.id, "--at", rows[1]["id"], "--json", env=env)
    assert fork.returncode == 0, fork.stderr
    child = json.loads(fork.stdout)
    assert sorted(os.listdir(child["workspace"])) == ["hello.py", "keep.txt"]
    assert child["branch"] is None  # a chat's fork has a directory of its own, no branch
    told = run_cli("fork", engine.id, "--at", rows[1]["id"], env=env)
    assert told.returncode == 0, told.stderr
    assert "tilth chat --resume" in told.stdout
    assert "tilth resume" not in told.stdout and "branch" not in told.stdout


def test_an_interrupted_chat_rewind_is_finished_on_the_next_start(tmp_path: Path) -> None:
    engine, _, work = story(tmp_path)
    engine.close()
    env = {"TILTH_HOME": str(engine.settings.home), "TILTH_FAULT_AT": "code+"}
    ref = engine.turns()[0].id
    killed = run_cli("rewind", engine.id, "--to", ref, "--scope", "both", "-y", env=env)
    assert killed.returncode != 0
    again = ChatEngine.resume(
        chat_settings(tmp_path),
        engine.id,
        ScriptedModel(Script({"*": [reply("fresh")]})),
        index_in_background=False,
    )
    result = again.send("after the crash")  # recovery runs first, under the lock
    assert result["turn"] == 1
    assert sorted(os.listdir(work)) == ["keep.txt"]


def test_reset_deletes_a_chat_session_but_never_its_directory_or_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "# r\n"})
    engine, _, _ = story(tmp_path, directory=repo)
    engine.close()
    before = tree_hash(repo / ".git")
    env = {"TILTH_HOME": str(engine.settings.home)}
    resumed = run_cli("resume", engine.id, env=env)
    assert resumed.returncode == 2
    assert f"tilth chat --resume {engine.id}" in resumed.stderr
    to_seed = run_cli("reset", "--to-seed", engine.id, "-y", env=env)
    assert to_seed.returncode != 0 and "Traceback" not in to_seed.stderr
    done = run_cli("reset", engine.id, "-y", env=env)
    assert done.returncode == 0, done.stderr
    assert not engine.session.dir.exists()
    assert sorted(os.listdir(repo)) == [".git", "README.md", "hello.py", "keep.txt", "made.txt"]
    assert tree_hash(repo / ".git") == before


def test_summarize_from_the_command_line_on_a_chat_session(tmp_path: Path) -> None:
    from tests.chat.tty import chat_env, server_for

    engine, _, _ = story(tmp_path)
    engine.close()
    ref = engine.turns()[1].id
    server = server_for([reply("Earlier, hello.py was written.")])
    try:
        env = chat_env(engine.settings.home, server)
        done = run_cli("summarize", engine.id, "--at", ref, "--direction", "up-to", env=env)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    assert "summarized 4 message(s) up-to" in done.stdout
    history = engine.history()
    assert history[0]["kind"] == "summary" and "hello.py was written" in history[0]["text"]


def test_undo_returns_to_the_state_before_the_last_go_back(tmp_path: Path) -> None:
    engine, events, work = story(tmp_path, extra=[reply("after undo")])
    history = engine.history()
    engine.rewind(1, "both")
    assert sorted(os.listdir(work)) == ["keep.txt"] and engine.history() == []
    plan = engine.plan_undo()
    assert ("restore", "hello.py") in plan.files and ("restore", "made.txt") in plan.files
    engine.undo()
    assert sorted(os.listdir(work)) == ["hello.py", "keep.txt", "made.txt"]
    assert engine.history() == history
    assert [t.label for t in engine.turns()] == ["write hello", "make a file"]
    assert events.of("rewound")[-1]["op"] == "undo"
    # Undoing the undo is redo; and the chat goes on from wherever it stands.
    engine.undo()
    assert sorted(os.listdir(work)) == ["keep.txt"]
    engine.undo()
    assert engine.send("and on")["turn"] == 3


def test_undo_with_nothing_to_undo_is_a_clear_error(tmp_path: Path) -> None:
    engine, _, _ = story(tmp_path)
    with pytest.raises(UsageError, match="has nothing to undo") as raised:
        engine.plan_undo()
    # A chat has no restart, resume or reset --to-seed to name.
    assert raised.value.hint == "each rewind of the chat records an undo point"


@pytest.mark.parametrize("in_git", [False, True])
def test_doctor_finds_nothing_wrong_with_a_whole_chat_and_names_a_lost_directory(
    tmp_path: Path, in_git: bool
) -> None:
    """A chat has no prd.json and no branch; neither is damage to repair or discard."""
    from tilth.health.repair import diagnose

    work = tmp_path / "work"
    if in_git:
        make_repo(work)
    engine, _events, work = story(tmp_path, work)
    engine.close()
    session = engine.session
    assert diagnose(session) == []

    moved = tmp_path / "moved"
    work.rename(moved)
    problems = diagnose(session)
    assert [(p.key, p.fix) for p in problems] == [("directory", None)]
    assert problems[0].what.startswith("the chat's directory") and "is gone" in problems[0].what


def test_run_only_verbs_refuse_a_chat_and_reset_names_only_what_it_deletes(
    tmp_path: Path,
) -> None:
    """restart / reset --to-seed have nothing to act on in a chat; reset keeps DIR."""
    engine, _, work = story(tmp_path)
    engine.close()
    env = {"TILTH_HOME": str(engine.settings.home)}
    before = tree_hash(work)
    for args in (("restart", engine.id, "T-001", "-y"), ("reset", "--to-seed", engine.id, "-y")):
        refused = run_cli(*args, env=env)
        assert refused.returncode == 2, refused.stderr
        assert f"session {engine.id} is a chat session" in refused.stderr
        assert "prep-feature" not in refused.stderr and "Traceback" not in refused.stderr
    asked = run_cli("reset", engine.id, env=env)
    assert asked.returncode == 2
    assert f"directory  {work}" in asked.stdout and "yours" in asked.stdout
    assert "worktree" not in asked.stdout and "branch" not in asked.stdout
    done = run_cli("reset", engine.id, "-y", env=env)
    assert done.returncode == 0, done.stderr
    assert not engine.session.dir.exists()
    assert tree_hash(work) == before


def test_run_only_verbs_without_an_id_skip_a_newer_chat(tmp_path: Path) -> None:
    """``tilth resume`` / ``restart`` with no id mean the latest *run*, not a newer chat."""
    engine, _, _ = story(tmp_path)
    engine.close()
    env = {"TILTH_HOME": str(engine.settings.home)}
    alone = run_cli("resume", env=env)
    assert alone.returncode == 2, alone.stderr
    assert "no run sessions found" in alone.stderr and "chat session" not in alone.stderr
    restart = run_cli("restart", "T-001", "-y", env=env)
    assert restart.returncode == 2 and "no run sessions found" in restart.stderr
    listed = run_cli("checkpoints", env=env)  # verbs that work on chats still pick it
    assert listed.returncode == 0 and engine.id in listed.stderr
