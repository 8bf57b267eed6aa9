"""Grafting the winner, and ``tilth attempts --pick``, go through the timeline journal: a
``kill -9`` half-way leaves the parent half-updated, and the next ``tilth resume`` or
``tilth doctor --repair`` finishes it."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.agent.support import model_env, team_server
from tests.attempts.support import RIGHT, WRONG, differing_team, seed_add
from tests.conftest import run_cli
from tilth.session.pipelines import L1_STAGES


def test_a_graft_killed_half_way_is_finished_by_resume_and_a_pick_by_doctor_repair(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    seeded = seed_add(sessions_dir, repo)
    journal = seeded.session.dir / "timeline" / "journal.json"
    env = model_env("", TILTH_SANDBOX="off", TILTH_MAX_ITERATIONS_PER_TASK="4")
    expected = [f"task/T-001: complete {stage} stage" for stage in L1_STAGES]
    with team_server(differing_team(right=2, count=2)) as server:
        env["TILTH_BASE_URL"] = server.base_url
        killed = run_cli(
            "run", str(repo), "--attempts", "2",
            env={**env, "TILTH_FAULT_AT": "graft-log"}, cwd=tmp_path, timeout=240,
        )  # fmt: skip
        assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
        # Half-way: the branch moved and the task's files came, its events did not.
        assert journal.is_file()
        assert seeded.subjects() == expected
        assert not [e for e in seeded.events() if e.type in ("attempt_selected", "stage_completed")]

        again = run_cli("resume", seeded.session.id, env=env, cwd=tmp_path, timeout=240)
    assert again.returncode == 0, again.stdout + again.stderr
    assert not journal.exists()
    assert seeded.session.status == "all_done"
    assert seeded.subjects() == expected
    assert (seeded.worktree / "calc.py").read_text() == RIGHT["calc.py"]
    events = seeded.events()
    assert [e.payload["stage"] for e in events if e.type == "stage_completed"] == list(L1_STAGES)
    (selected,) = [e.payload for e in events if e.type == "attempt_selected"]
    loser = selected["attempts"][0]["session"]
    assert selected["winner"] == selected["attempts"][1]["session"]

    # A pick killed after its rewind, before the picked work's files came in.
    picked = run_cli(
        "attempts", seeded.session.id, "--pick", loser, "-y",
        env={"TILTH_FAULT_AT": "graft-files"}, cwd=tmp_path,
    )  # fmt: skip
    assert picked.returncode == -signal.SIGKILL, picked.stdout + picked.stderr
    assert journal.is_file()
    assert not [e for e in seeded.events() if e.type == "stage_completed"]
    repaired = run_cli("doctor", seeded.session.id, "--repair", "-y", cwd=tmp_path)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "finished an interrupted rewind" in repaired.stdout + repaired.stderr
    assert not journal.exists()
    assert (seeded.worktree / "calc.py").read_text() == WRONG["calc.py"]
    states = json.loads(run_cli("attempts", seeded.session.id, "--json").stdout)
    assert [a["session"] for a in states if a["state"] == "winner"] == [loser]
    (chosen,) = [e.payload for e in seeded.events() if e.type == "attempt_selected"]
    assert chosen["picked"] is True and chosen["winner"] == loser
    undone = run_cli("rewind", seeded.session.id, "--undo", "-y")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert (seeded.worktree / "calc.py").read_text() == RIGHT["calc.py"]
    assert seeded.subjects() == expected
