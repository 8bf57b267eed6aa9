"""``rewind --scope code`` past finished tasks (the plan says so, and ``resume`` redoes them),
then mid-task on the same session (the surviving stages are kept)."""

from __future__ import annotations

import json
from pathlib import Path

from agent.support import TASKS, model_env, recipes, seed_session, team_server, tilth

from tilth.demo.script import Team


def test_code_rewinds_past_done_tasks_and_mid_task_leave_state_resume_acts_on(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:2])
    sid = seeded.session.id
    with team_server(Team(recipes())) as server:
        env = model_env(server.base_url)
        assert tilth("run", str(repo), env=env).returncode == 0
        assert seeded.statuses() == {"T-001": "done", "T-002": "done"}
        listed = json.loads(tilth("checkpoints", sid, "--json", env=env).stdout)
        target = next(c for c in listed if c["kind"] == "task_start" and c["task_id"] == "T-002")
        dry = tilth("rewind", sid, "--to", target["id"], "--scope", "code", "--dry-run", env=env)
        assert dry.returncode == 0, dry.stderr
        assert "T-002: done -> pending" in dry.stdout
        assert "T-002: the commits of" in dry.stdout and "goes back to pending" in dry.stdout
        assert "T-001:" not in dry.stdout.split("tasks")[-1]
        assert seeded.statuses()["T-002"] == "done"  # a dry run changes nothing
        done = tilth("rewind", sid, "--to", target["id"], "--scope", "code", "-y", env=env)
        assert done.returncode == 0, done.stderr
        assert seeded.statuses() == {"T-001": "done", "T-002": "pending"}
        assert not (seeded.session.tasks_dir / "T-002.json").exists()
        assert not (seeded.worktree / "textkit/shout.py").exists()
        resumed = tilth("resume", sid, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "nothing to resume" not in resumed.stdout
    assert seeded.statuses() == {"T-001": "done", "T-002": "done"}
    assert (seeded.worktree / "textkit/shout.py").exists()
    assert seeded.subjects().count("task/T-002: complete verifying stage") == 1

    # Mid-task, on the same session: a code rewind to T-002's planning keeps that stage,
    # and resume re-runs the task from implementing.
    with team_server(Team(recipes())) as server:
        env = model_env(server.base_url)
        mid = tilth("rewind", sid, "--to", "T-002/planning", "--scope", "code", "-y", env=env)
        assert mid.returncode == 0, mid.stderr
        assert "T-002: done -> in_progress" in mid.stdout
        assert "re-runs it from implementing" in mid.stdout
        state = json.loads((seeded.session.tasks_dir / "T-002.json").read_text())
        assert state["stages_done"] == ["planning"]
        assert seeded.statuses()["T-001"] == "done"
        resumed = tilth("resume", sid, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert seeded.statuses() == {"T-001": "done", "T-002": "done"}
    assert seeded.subjects().count("task/T-002: complete planning stage") == 1
    assert seeded.subjects().count("task/T-002: complete verifying stage") == 1
