"""Attempts stopped by the wall-clock cap stop the run as the cap would stop it alone:
reason ``wall_clock``, exit 3, the session still resumable (``running``), never an
``error`` with exit 1 and status ``failed`` (found in the llama.cpp user trial: a
3-minute cap on `tilth run --attempts 2` ended ``stopped error``, exit 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.agent.support import model_env, team_server
from tests.attempts.support import differing_team, seed_add
from tests.conftest import run_cli
from tilth.model.script import reply, tool_call


def slow_busy_worker(model: str, request: dict[str, Any]) -> dict[str, Any]:
    """Every reply is one more ``bash`` call, a little late: no attempt ends its task,
    so only the wall clock stops them."""
    return {"type": "delay", "seconds": 0.2, "then": reply(None, tool_call("bash", command="true"))}


def test_attempts_cut_short_by_the_wall_clock_stop_the_run_on_the_wall_clock(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    seeded = seed_add(sessions_dir, repo)
    env = model_env(
        "",
        TILTH_SANDBOX="off",
        TILTH_MAX_ITERATIONS_PER_TASK="0",
        TILTH_MAX_WALL_CLOCK_MINUTES="0.03",
    )
    with team_server(slow_busy_worker) as server:
        env["TILTH_BASE_URL"] = server.base_url
        result = run_cli(
            "run", str(repo), "--attempts", "2", "--parallel", "2", env=env, cwd=tmp_path
        )
    output = result.stdout + result.stderr
    assert result.returncode == 3, output
    assert seeded.session.last_stop() == "wall_clock", output
    assert seeded.session.status == "running", output
    assert "TILTH_MAX_WALL_CLOCK_MINUTES" in output
    assert f"tilth resume {seeded.session.id}" in output
    assert "stopped   error" not in output
    # The summary's status agrees with `tilth sessions`: the run has ended.
    assert "status    stopped, resumable" in output and "status    running" not in output


def test_a_plain_resume_runs_the_attempts_a_cap_cut_short_on(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    """The stop's advice, `tilth resume <id>` (no --attempts), continues the attempts; it
    used to start the task over in place beside them and leave them undecided."""
    seeded = seed_add(sessions_dir, repo)
    env = model_env(
        "",
        TILTH_SANDBOX="off",
        TILTH_MAX_ITERATIONS_PER_TASK="0",
        TILTH_MAX_WALL_CLOCK_MINUTES="0.03",
    )
    with team_server(slow_busy_worker) as server:
        env["TILTH_BASE_URL"] = server.base_url
        stopped = run_cli("run", str(repo), "--attempts", "2", env=env, cwd=tmp_path)
    assert stopped.returncode == 3, stopped.stdout + stopped.stderr
    started = [e.payload for e in seeded.events() if e.type == "attempts_started"]
    assert len(started) == 1 and len(started[0]["attempts"]) == 2
    env = model_env("", TILTH_SANDBOX="off", TILTH_MAX_ITERATIONS_PER_TASK="4")
    with team_server(differing_team(right=1, count=2)) as server:
        env["TILTH_BASE_URL"] = server.base_url
        resumed = run_cli("resume", seeded.session.id, env=env, cwd=tmp_path, timeout=240)
    output = resumed.stdout + resumed.stderr
    assert "2 attempts from" in output, output
    selected = [e.payload for e in seeded.events() if e.type == "attempt_selected"]
    assert [s["task_id"] for s in selected] == ["T-001"], output
    assert {a["session"] for a in selected[0]["attempts"]} == set(started[0]["attempts"])
