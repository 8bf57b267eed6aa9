"""The worker never sees ``seed-meta.json`` (the third seed): it is the interview's audit
trail for the visualizer and the human reviewer; the worker's contract is ``prd.json`` and
the seed tests."""

from __future__ import annotations

from pathlib import Path

from agent.support import (
    TASKS,
    model_env,
    recipes,
    request_text,
    seed_session,
    team_server,
    tilth,
    worker_requests,
)
from tilth.demo.script import Team
from tilth.session.files import atomic_write_json

META = {
    "interviewer_model": "scripted-interviewer",
    "tokens": {"prompt": 20, "completion": 10, "total": 30},
    "tldr": "TLDR-MARKER-4b1e",
    "open_questions": ["OPEN-QUESTION-MARKER-9c2d: should words split on hyphens?"],
    "blockers": ["BLOCKER-MARKER-77aa"],
    "scope_notes": "SCOPE-MARKER-e5f0",
}


def test_no_worker_request_carries_the_interviews_audit_trail(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:2])
    atomic_write_json(seeded.session.seed_meta_path, META)
    with team_server(Team(recipes())) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url))
        requests = worker_requests(server)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(requests) > 4  # planning and implementing of two tasks
    assert any("Count words" in request_text(r) for r in requests)  # prd.json is there
    for body in requests:
        text = request_text(body)
        for marker in ("TLDR-MARKER", "OPEN-QUESTION-MARKER", "BLOCKER-MARKER", "SCOPE-MARKER"):
            assert marker not in text
        assert "Seed context" not in text
