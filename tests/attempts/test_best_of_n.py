"""Best of N (SPEC §11): attempts forked from the task's start, the winner chosen by checks."""

from __future__ import annotations

import json
from pathlib import Path

from tests.attempts.support import RIGHT, against_differing_team, seed_add
from tests.conftest import run_cli
from tilth import git
from tilth.session.pipelines import L1_STAGES


def test_three_attempts_keep_the_one_that_passes(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    seeded = seed_add(sessions_dir, repo)
    result = against_differing_team("run", str(repo), "--attempts", "3", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert seeded.session.status == "all_done"
    assert (seeded.worktree / "calc.py").read_text() == RIGHT["calc.py"]
    expected = [f"task/T-001: complete {stage} stage" for stage in L1_STAGES]
    assert seeded.subjects() == expected

    selected = [e.payload for e in seeded.events() if e.type == "attempt_selected"]
    assert len(selected) == 1
    figures = selected[0]["attempts"]
    assert len(figures) == 3
    assert [f["passed"] for f in figures] == [False, True, False]
    assert selected[0]["winner"] == figures[1]["session"]
    assert all(f["reason"] for f in figures)
    # Every attempt's tokens count toward the session's caps, the losers' too.
    assert seeded.session.tokens_used == sum(f["tokens"] for f in figures)
    assert all(f["tokens"] > 0 for f in figures)
    # The winner's stage checkpoints and events are the parent's own now.
    stages = [e.payload for e in seeded.events() if e.type == "stage_completed"]
    assert [s["stage"] for s in stages] == list(L1_STAGES)
    log = git.git("log", "--format=%H", f"{seeded.seed_sha}..HEAD", cwd=seeded.worktree)
    assert [s["sha"] for s in stages] == list(reversed(log.split()))

    listed = json.loads(run_cli("sessions", "--json").stdout)
    children = [s for s in listed if s.get("parent") == seeded.session.id]
    assert sorted(s["id"] for s in children) == sorted(f["session"] for f in figures)
    assert {s["kind"] for s in children} == {"attempt"}

    shown = json.loads(run_cli("attempts", seeded.session.id, "T-001", "--json").stdout)
    assert [(a["session"], a["state"]) for a in shown] == [
        (f["session"], "winner" if f["passed"] else "lost") for f in figures
    ]
    assert all(a["task_id"] == "T-001" and "diff_lines" in a for a in shown)

    # The won task restarts from code_review as one run in place does.
    restarted = run_cli("restart", seeded.session.id, "T-001", "--from", "code_review", "-y")
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    assert seeded.subjects() == expected[:2]
    again = against_differing_team("resume", seeded.session.id, cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert seeded.subjects() == expected
    assert (seeded.worktree / "calc.py").read_text() == RIGHT["calc.py"]

    # The web UI shows them under the task and plans a pick without changing anything.
    loser = figures[0]["session"]
    _web_shows_attempts(seeded.session.id, loser, figures)

    # --pick puts a losing attempt in the winner's place, planned and undoable.
    plan = run_cli("attempts", seeded.session.id, "--pick", loser, "--dry-run")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "rewind" in plan.stdout.lower() and loser in plan.stdout
    assert (seeded.worktree / "calc.py").read_text() == RIGHT["calc.py"]
    picked = run_cli("attempts", seeded.session.id, "--pick", loser, "-y")
    assert picked.returncode == 0, picked.stdout + picked.stderr
    assert (seeded.worktree / "calc.py").read_text() != RIGHT["calc.py"]
    states = json.loads(run_cli("attempts", seeded.session.id, "--json").stdout)
    assert [a["session"] for a in states if a["state"] == "winner"] == [loser]
    undone = run_cli("rewind", seeded.session.id, "--undo", "-y")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert (seeded.worktree / "calc.py").read_text() == RIGHT["calc.py"]
    assert seeded.subjects() == expected

    # An attempt whose checkpoint.json is rebuilt by the doctor is still the parent's attempt.
    record = sessions_dir / loser / "checkpoint.json"
    kept = json.loads(record.read_text())
    listed_before = run_cli("attempts", seeded.session.id, "--json").stdout
    record.write_text("{oops")
    repaired = run_cli("doctor", loser, "--repair", "-y")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    rebuilt = json.loads(record.read_text())
    assert (rebuilt["kind"], rebuilt["attempt"]) == (kept["kind"], kept["attempt"])
    assert rebuilt["parent_session"] == seeded.session.id
    assert run_cli("attempts", seeded.session.id, "--json").stdout == listed_before


def _web_shows_attempts(session_id: str, loser: str, figures: list[dict[str, object]]) -> None:
    from tests.web.conftest import TOKEN, app_client

    with app_client(Authorization=f"Bearer {TOKEN}") as client:
        detail = client.get(f"/api/sessions/{session_id}").json()
        shown = [(a["session"], a["state"], a["reason"]) for a in detail["attempts"]]
        assert shown == [
            (f["session"], "winner" if f["passed"] else "lost", f["reason"]) for f in figures
        ]
        planned = client.post(
            f"/api/sessions/{session_id}/attempts/pick", json={"session": loser, "dry_run": True}
        )
        assert planned.status_code == 200, planned.text
        assert planned.json()["plan"]["attempt"] == loser
        assert "the Undo button" in planned.json()["text"]
        refused = client.post(
            f"/api/sessions/{session_id}/attempts/pick", json={"session": "nope", "dry_run": True}
        )
        assert refused.status_code == 400 and "not an attempt" in refused.json()["error"]


def test_resetting_the_parent_deletes_its_attempts(repo: Path, sessions_dir: Path) -> None:
    """The attempts stay until the parent is reset: then they go with it."""
    from tilth.session.files import atomic_write_json
    from tilth.session.store import Session

    seeded = seed_add(sessions_dir, repo)
    child = Session.create(sessions_dir, repo)
    record = {"parent": seeded.session.id, "task_id": "T-001", "number": 1, "of": 1}
    atomic_write_json(child.checkpoint_path, {**child.record().to_dict(), "kind": "attempt"})
    child.update_checkpoint(attempt=record, parent_session=seeded.session.id)
    other = Session.create(sessions_dir, repo)
    done = run_cli("reset", seeded.session.id, "-y")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 attempt session(s) it made go too" in done.stdout
    assert not seeded.session.dir.exists() and not child.dir.exists()
    assert other.dir.exists()


def test_an_attempts_figures_are_shown_as_every_token_count_is(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    """Against a real model the decided attempts read ``18982 token(s)`` and ``more tokens
    (22237 against 7513)`` beside ``2,032 so far`` and the summary's ``45,816 by runs``."""
    from tests.agent.support import model_env, team_server
    from tests.attempts.support import differing_team

    team = differing_team(right=2, count=2)

    def costly(model: str, request: dict[str, object]) -> dict[str, object]:
        answer = dict(team(model, request))
        answer["usage"] = {"prompt_tokens": 1_200, "completion_tokens": 34}
        return answer

    seeded = seed_add(sessions_dir, repo)
    env = model_env("", TILTH_SANDBOX="off", TILTH_MAX_ITERATIONS_PER_TASK="4")
    with team_server(costly) as server:
        env["TILTH_BASE_URL"] = server.base_url
        result = run_cli("run", str(repo), "--attempts", "2", env=env, cwd=tmp_path, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    (selected,) = [e.payload for e in seeded.events() if e.type == "attempt_selected"]
    spent = [f["tokens"] for f in selected["attempts"]]
    assert min(spent) >= 1_000
    for tokens in spent:
        assert f"{tokens:,} token(s)" in result.stdout, result.stdout
        assert f" {tokens} " not in result.stdout + " "
    listed = run_cli("attempts", seeded.session.id).stdout
    for tokens in spent:
        assert f"{tokens:,}" in listed and f" {tokens} " not in listed, listed
