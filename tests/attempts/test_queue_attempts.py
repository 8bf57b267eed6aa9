"""A queued session with attempts: ``tilth worker --parallel 1`` runs it and its attempts.

The session's workflow waits for its task's attempts; on one queue it held the worker's only
place and the attempts never started (the worker hung for good, found by a soak)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.agent.support import model_env, team_server
from tests.attempts.queue_support import wait_for, workers
from tests.attempts.support import RIGHT, seed_add
from tilth.demo.script import Recipe, Team


@pytest.mark.slow
def test_a_worker_with_one_place_runs_a_queued_session_s_attempts(
    repo: Path, sessions_dir: Path, tilth_home: Path, tmp_path: Path
) -> None:
    from tests.conftest import run_cli

    seeded = seed_add(sessions_dir, repo)
    env = {
        **os.environ,
        **model_env("", TILTH_SANDBOX="off", TILTH_ATTEMPTS="2"),
        "TILTH_HOME": str(tilth_home),
    }
    team = Team({"T-001": Recipe(files=dict(RIGHT), test_command="true")})
    with team_server(team) as server:
        env["TILTH_BASE_URL"] = server.base_url
        queued = run_cli("enqueue", seeded.session.id, env=env, cwd=tmp_path)
        assert queued.returncode == 0, queued.stdout + queued.stderr
        with workers(1, env, tmp_path, parallel=1):
            try:
                wait_for(lambda: seeded.session.status == "all_done", 90, "the session")
            except AssertionError:
                kinds = sorted(p.name for p in sessions_dir.iterdir())
                log = (tmp_path / "worker-0.log").read_text()
                raise AssertionError(f"sessions {kinds}; the worker said:\n{log}") from None
    selected = [e for e in seeded.events() if e.type == "attempt_selected"]
    assert len(selected) == 1 and len(selected[0].payload["attempts"]) == 2
    assert (seeded.worktree / "calc.py").read_text() == RIGHT["calc.py"]
