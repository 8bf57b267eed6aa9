"""A restart followed by a resume, through the CLI on the fake server (the fifth seed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.support import TASKS, model_env, seed_session, team_server, tilth
from tests.one_more_rejection import OneMoreRejection
from tilth.demo.script import Recipe, Team

FIRST = {"textkit/words.py": "def count_words(text):\n    return len(text.split())\n"}
FIXED = {
    "textkit/words.py": 'def count_words(text):\n    """Words: runs of non-space."""\n'
    "    return len(text.split())\n"
}


def _demo_like_team() -> Team:
    """T-001 rejected once at code review, then accepted (the demo's story)."""
    recipe = Recipe(files=FIRST, fixed=FIXED, accept_when="runs of non-space", test_command="true")
    return Team({"T-001": recipe})


def _task_state(session_dir: Path) -> dict[str, Any]:
    return json.loads((session_dir / "tasks" / "T-001.json").read_text())


def test_restart_from_code_review_resets_its_review_counter(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    sid = seeded.session.id
    with team_server(_demo_like_team()) as server:
        first = tilth("run", str(repo), env=model_env(server.base_url))
    assert first.returncode == 0, first.stdout + first.stderr
    assert _task_state(seeded.session.dir)["rejections"] == 1

    restarted = tilth("restart", sid, "T-001", "--from", "code_review", "-y")
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    state = _task_state(seeded.session.dir)
    assert state["rejections"] == 0, "code_review re-runs, so its rejections are forgotten"
    assert state["stages_done"] == ["planning", "implementing"]
    assert "review counters reset: code_review" in restarted.stdout

    # One new rejection under a cap of two: the task must still finish.
    script = OneMoreRejection(_demo_like_team())
    with team_server(script) as server:
        resumed = tilth(
            "resume", sid, env=model_env(server.base_url, TILTH_MAX_EVALUATOR_CALLS_PER_TASK="2")
        )
    assert script.rejected == 1
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert seeded.statuses() == {"T-001": "done"}
    assert "evaluator_cap" not in [e.payload.get("reason") for e in seeded.events()]
