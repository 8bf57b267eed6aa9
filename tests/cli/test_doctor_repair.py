"""``tilth doctor <id> [--repair]`` on each damaged state, through the real CLI.

The story (T-001 done, T-002 failed on the iteration cap) is built once per test process
and copied back in place for every test (``tests/doctor_story.py``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from agent.support import team_server, tilth
from doctor_story import Story, story_team

from tests.conftest import git
from tests.warm_cli import shared
from tilth.session.store import Session


@pytest.fixture
def story(saved_story: Story) -> Story:
    return saved_story.restore()


def _doctor(story: Story, *args: str) -> Any:
    return story.cli("doctor", story.sid, *args)


def _problems(story: Story, *args: str) -> list[dict[str, Any]]:
    done = _doctor(story, "--json", *args)
    problems: list[dict[str, Any]] = json.loads(done.stdout)["problems"]
    return problems


def _repair(story: Story, *args: str) -> Any:
    done = _doctor(story, "--repair", "-y", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _doctor(story, *args[:0]).returncode == 0
    return done


def test_a_whole_session_has_no_problems(story: Story) -> None:
    done = _doctor(story)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"session {story.sid}: no problems found" in done.stdout


def test_a_deleted_session_branch_is_re_pointed_at_the_last_recorded_commit(story: Story) -> None:
    tip = git(story.repo, "rev-parse", f"session/{story.sid}").strip()
    git(story.repo, "update-ref", "-d", f"refs/heads/session/{story.sid}")
    resumed = story.cli("resume", story.sid)
    assert resumed.returncode == 2
    assert f"tilth doctor {story.sid} --repair" in resumed.stderr
    assert "tilth reset" not in resumed.stderr
    diagnosed = _doctor(story)
    assert diagnosed.returncode == 1
    assert f"branch session/{story.sid} is gone" in diagnosed.stdout
    assert "the last recorded commit" in diagnosed.stdout
    refused = _doctor(story, "--repair")
    assert refused.returncode == 2 and "--repair -y" in refused.stderr
    repaired = _repair(story)
    assert f"re-pointed session/{story.sid}" in repaired.stdout
    # The FAILED placeholder was the last commit made; its task_failed event recorded it.
    assert git(story.repo, "rev-parse", f"session/{story.sid}").strip() == tip


@pytest.mark.parametrize("damage", ["truncated", "deleted"])
def test_a_truncated_prd_json_is_restored_from_the_latest_checkpoint(
    story: Story, damage: str
) -> None:
    before = story.statuses()
    if damage == "deleted":
        story.session.prd_path.unlink()
    else:
        story.session.prd_path.write_text('[{"id": "T-0')
    resumed = story.cli("resume", story.sid)
    assert resumed.returncode == 1
    assert "prd.json" in resumed.stderr and f"tilth doctor {story.sid} --repair" in resumed.stderr
    (problem,) = _problems(story)
    assert problem["problem"] == "prd" and problem["fix"].startswith("restore prd.json from cp-")
    _repair(story)
    assert story.statuses() == before


def test_a_deleted_worktree_is_re_created_for_rewind(story: Story) -> None:
    shutil.rmtree(story.session.workspace_dir)
    rewind = story.cli("rewind", story.sid, "--to", "T-001", "--dry-run")
    assert rewind.returncode != 0
    assert f"tilth doctor {story.sid} --repair" in rewind.stderr
    assert "tilth reset" not in rewind.stderr
    (problem,) = _problems(story)
    assert problem["problem"] == "worktree"
    _repair(story)
    assert (story.session.workspace_dir / "textkit" / "words.py").exists()
    assert story.cli("rewind", story.sid, "--to", "T-001", "--dry-run").returncode == 0


def test_a_moved_source_repository_is_re_attached(story: Story) -> None:
    moved = story.repo.parent / "repo-moved"
    story.repo.rename(moved)
    diagnosed = _doctor(story)
    assert diagnosed.returncode == 1
    assert "--source NEWPATH" in diagnosed.stdout
    (problem,) = _problems(story)
    assert problem["problem"] == "source" and problem["fix"] is None
    wrong = _problems(story, "--source", str(story.root))
    assert wrong and wrong[0]["fix"] is None
    repaired = story.cli("doctor", story.sid, "--repair", "-y", "--source", str(moved))
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert story.session.source == moved.resolve()
    assert _doctor(story).returncode == 0
    status = git(story.session.workspace_dir, "status", "--porcelain")
    assert status == ""
    with team_server(story_team()) as server:
        resumed = story.cli("resume", story.sid, TILTH_BASE_URL=server.base_url)
    assert resumed.returncode == 3, resumed.stdout + resumed.stderr  # T-002 stalls again


def test_a_deleted_event_log_is_never_silently_started_afresh(story: Story) -> None:
    story.session.events.path.unlink()
    resumed = story.cli("resume", story.sid)
    assert resumed.returncode == 1
    assert "events.jsonl" in resumed.stderr and "missing" in resumed.stderr
    assert not story.session.events.path.exists()
    _repair(story)
    types = [e.type for e in story.session.events.events()]
    assert types == ["session_start", "session_prepared", "seed_committed", "events_restored"]
    seed = story.session.events.last("seed_committed")
    assert seed is not None
    subject = git(story.repo, "log", "-1", "--format=%s", seed.payload["sha"])
    assert subject.startswith("seed: 2 task(s)")
    with team_server(story_team()) as server:
        resumed = story.cli("resume", story.sid, TILTH_BASE_URL=server.base_url)
    assert resumed.returncode == 3, resumed.stdout + resumed.stderr


def test_a_damaged_checkpoint_json_is_rebuilt(story: Story) -> None:
    story.session.checkpoint_path.write_text("{oops")
    sessions = story.cli("resume", story.sid)
    assert f"tilth doctor {story.sid} --repair" in sessions.stderr
    _repair(story)
    cp = story.session.record().to_dict()
    assert cp["source"] == str(story.repo) and cp["branch"] == f"session/{story.sid}"
    assert cp["status"] == "failed"


def test_a_rebuilt_checkpoint_json_keeps_a_forks_parent(story: Story) -> None:
    forked = story.cli("fork", story.sid, "--at", "T-001", "--json")
    assert forked.returncode == 0, forked.stdout + forked.stderr
    child_id = json.loads(forked.stdout)["session_id"]
    child = Session(child_id, story.session.dir.parent / child_id)
    before = child.record().to_dict()
    child.checkpoint_path.write_text("{oops")

    repaired = story.cli("doctor", child_id, "--repair", "-y")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    after = child.record().to_dict()
    assert after["parent_session"] == story.sid
    kept = ("session", "checkpoint", "label", "head")
    assert {k: after["forked_from"][k] for k in kept} == {k: before["forked_from"][k] for k in kept}
    listed = json.loads(story.cli("sessions", "--json").stdout)
    assert next(s for s in listed if s["id"] == child_id)["parent"] == story.sid


def test_a_detached_worktree_is_put_back_on_its_branch(story: Story) -> None:
    git(story.session.workspace_dir, "checkout", "-q", "--detach")
    (problem,) = _problems(story)
    assert problem["problem"] == "head"
    _repair(story)
    assert git(story.session.workspace_dir, "symbolic-ref", "--short", "HEAD").strip() == (
        f"session/{story.sid}"
    )


def test_on_a_terminal_each_repair_is_shown_and_confirmed(story: Story) -> None:
    import os
    import pty
    import select
    import time

    story.session.prd_path.write_text("")
    shutil.rmtree(story.session.workspace_dir)
    leader, follower = pty.openpty()
    child = shared().popen(
        ["doctor", story.sid, "--repair"],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env={**os.environ, **story.env},
    )
    os.close(follower)
    seen, answers = b"", [b"n\n", b"y\n"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            if answers and seen.count(b"[y/N]") > 2 - len(answers):
                os.write(leader, answers.pop(0))
        elif child.poll() is not None:
            break
    os.close(leader)
    code = child.wait(timeout=30)
    screen = seen.decode(errors="replace")
    assert "repair:  restore prd.json from cp-" in screen
    assert "skipped" in screen  # the first question was answered n
    assert "repair:  re-create the worktree" in screen
    assert "done: re-created the worktree" in screen
    assert code == 1, screen  # prd.json is still damaged: it was declined
    assert story.session.workspace_dir.is_dir()
    assert story.session.prd_path.read_text() == ""


def test_a_chat_session_is_diagnosed_as_a_chat(tmp_path: Path) -> None:
    """No branch, worktree or seed to miss: a chat's log and directory are what can break."""
    from tests.chat.test_chat_scripted import run_chat
    from tilth.model import reply

    work = tmp_path / "dir"
    work.mkdir()
    done = run_chat(tmp_path, str(work), ["hello"], [reply("Hi.")])
    assert done.returncode == 0, done.stderr
    home = tmp_path / "home"
    (sid,) = [p.name for p in (home / "sessions").iterdir()]
    session = Session(sid, home / "sessions" / sid)
    env = {"TILTH_HOME": str(home)}
    whole = tilth("doctor", sid, env=env)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    session.checkpoint_path.write_text("{")
    repaired = tilth("doctor", sid, "--repair", "-y", env=env)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    cp = session.record().to_dict()
    assert cp["kind"] == "chat" and cp["branch"] is None
    assert cp["workspace"] == str(work.resolve())
    session.events.path.unlink()
    assert tilth("doctor", sid, "--repair", "-y", env=env).returncode == 0
    assert [e.type for e in session.events.events()] == ["session_start", "events_restored"]
    shutil.rmtree(work)
    gone = tilth("doctor", sid, "--json", env=env)
    problems = json.loads(gone.stdout)["problems"]
    assert [p["problem"] for p in problems] == ["directory"] and problems[0]["fix"] is None
