"""``rewind --scope code`` past finished tasks: the plan says so, and ``resume`` redoes them."""

from __future__ import annotations

import json
from pathlib import Path

from agent.support import TASKS, model_env, recipes, seed_session, team_server, tilth

from tilth.demo.script import Team


def test_a_code_rewind_past_done_tasks_leaves_state_resume_acts_on(
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


def test_a_code_rewind_mid_task_keeps_the_surviving_stages(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    sid = seeded.session.id
    with team_server(Team(recipes())) as server:
        env = model_env(server.base_url)
        assert tilth("run", str(repo), env=env).returncode == 0
        done = tilth("rewind", sid, "--to", "T-001/planning", "--scope", "code", "-y", env=env)
        assert done.returncode == 0, done.stderr
        assert "T-001: done -> in_progress" in done.stdout
        assert "re-runs it from implementing" in done.stdout
        state = json.loads((seeded.session.tasks_dir / "T-001.json").read_text())
        assert state["stages_done"] == ["planning"]
        resumed = tilth("resume", sid, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert seeded.statuses() == {"T-001": "done"}
    assert seeded.subjects().count("task/T-001: complete planning stage") == 1
