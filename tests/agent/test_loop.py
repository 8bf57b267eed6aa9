"""The outer loop through the real CLI: a three-task seed run to all_done, and a rejection cycle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.support import (
    TASKS,
    evaluator_requests,
    model_env,
    recipes,
    request_text,
    seed_session,
    team_server,
    tilth,
)
from tilth import git
from tilth.demo.script import WORKER, Recipe, Team
from tilth.model.script import Reply, error
from tilth.session.pipelines import L1_STAGES

DOCSTRING = '"""Count the words in text."""'


def test_three_tasks_run_to_all_done(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo)
    source_head = git.head(repo)
    with team_server(Team(recipes())) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr

    assert seeded.statuses() == {"T-001": "done", "T-002": "done", "T-003": "done"}
    assert seeded.session.status == "all_done"
    assert seeded.stops() == ["all_done"]
    expected = [f"task/{t['id']}: complete {stage} stage" for t in TASKS for stage in L1_STAGES]
    assert seeded.subjects() == expected

    events = seeded.events()
    start = next(e for e in events if e.type == "session_start" and e.payload["phase"] == "run")
    assert start.payload["branch"] == seeded.session.branch
    assert Path(start.payload["worktree"]) == seeded.worktree
    stage_shas = [e.payload["sha"] for e in events if e.type == "stage_completed"]
    log = git.git("log", "--format=%H", f"{seeded.seed_sha}..HEAD", cwd=seeded.worktree)
    assert stage_shas == list(reversed(log.split()))
    commits = [e.payload for e in events if e.type == "commit"]
    assert [c["task_id"] for c in commits] == ["T-001", "T-002", "T-003"]
    by_task = {
        (e.payload["task_id"], e.payload["stage"]): e.payload["sha"]
        for e in events
        if e.type == "stage_completed"
    }
    assert all(c["sha"] == by_task[(c["task_id"], "verifying")] for c in commits)
    done = [e.payload["task_id"] for e in events if e.type == "task_done"]
    assert done == ["T-001", "T-002", "T-003"]
    assert events[-1].type == "stop"

    for task in TASKS:
        ledger = seeded.session.ledger.read(task["id"])
        assert ledger and ledger[-1]["verdict"]["verdict"] == "accept"
    progress = seeded.session.progress_path.read_text().splitlines()
    assert progress == [f"{t['id']}\tdone\t{t['title']}" for t in TASKS]
    summary = json.loads(seeded.session.summary_path.read_text())
    assert summary["version"] == 1
    assert summary["stop"]["reason"] == "all_done"
    assert {tid: t["status"] for tid, t in summary["tasks"].items()} == {
        "T-001": "done",
        "T-002": "done",
        "T-003": "done",
    }
    assert summary["task_counts"]["done"] == 3

    # The user's repository is untouched: same HEAD, clean tree, still on main.
    assert git.head(repo) == source_head
    assert not git.is_dirty(repo)
    assert "run summary" in result.stdout and "tasks     3 total: 3 done" in result.stdout


def test_a_rejected_task_is_reworked_and_accepted(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    body = "def count_words(text):\n    return len(text.split())\n"
    fixed = {"textkit/words.py": f"{DOCSTRING}\n\n\n{body}"}
    first = Recipe(
        files={"textkit/words.py": body},
        fixed=fixed,
        accept_when=DOCSTRING,
        concern="the module has no docstring",
        next_step="add a module docstring",
        test_command="true",
    )
    team = Team(recipes(T_001=first))
    failed_once: list[str] = []

    def flaky(model: str, request: dict[str, Any]) -> Reply:
        # The very first worker call gets a 503: the run retries it and logs model_retry.
        if model == WORKER and not failed_once:
            failed_once.append(model)
            return error(503, "upstream overloaded")
        return team(model, request)

    with team_server(flaky) as server:
        env = model_env(server.base_url, TILTH_MODEL_MAX_RETRIES="1")
        result = tilth("run", str(repo), env=env)
        reviews = evaluator_requests(server)
    assert result.returncode == 0, result.stdout + result.stderr
    verdicts = [
        e.payload["verdict"]
        for e in seeded.events()
        if e.type == "evaluator_verdict" and e.payload.get("stage") == "code_review"
    ]
    assert verdicts == ["reject", "accept"]
    ledger = seeded.session.ledger.read("T-001")
    assert [entry["verdict"]["verdict"] for entry in ledger][-2:] == ["reject", "accept"]
    assert DOCSTRING in (seeded.worktree / "textkit/words.py").read_text()
    # The second review saw the first one's rejection in the task's ledger.
    assert "the module has no docstring" in request_text(reviews[-1])
    assert seeded.statuses() == {"T-001": "done"}
    retries = [e.payload for e in seeded.events() if e.type == "model_retry"]
    assert [(r["role"], r["attempt"]) for r in retries] == [("worker", 1)]
    assert "503" in retries[0]["reason"]
    assert json.loads(seeded.session.summary_path.read_text())["model_retries"] == 1


def test_events_carry_the_reference_payload_fields(repo: Path, sessions_dir: Path) -> None:
    """SPEC §4: the MUST events carry the reference's payload fields (ours come on top)."""
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    with team_server(Team(recipes())) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url))
    assert result.returncode == 0, result.stdout + result.stderr
    events = seeded.events()

    def payloads(kind: str) -> list[dict[str, Any]]:
        return [e.payload for e in events if e.type == kind]

    calls = payloads("model_call")
    for call in calls:
        assert {"prompt_tokens", "eval_tokens", "tokens_used_total"} <= set(call), call
        assert call["eval_tokens"] == call["completion_tokens"]
    reviews = [c for c in calls if c.get("actor") == "evaluator"]
    assert reviews and all(c["phase"] == "evaluator" and c["attempt"] == 1 for c in reviews)
    assert all("phase" not in c for c in calls if c.get("actor") == "worker")
    assert all({"task_id", "tool", "args"} <= set(p) for p in payloads("tool_call"))
    assert all(
        {"task_id", "tool", "result_preview", "result_chars"} <= set(p)
        for p in payloads("tool_result")
    )
    verdicts = payloads("evaluator_verdict")
    assert all(
        {"task_id", "schema_version", "verdict", "concern", "evidence"} <= set(v) for v in verdicts
    )
    assert [(p["task_id"], bool(p["summary"])) for p in payloads("task_done")] == [("T-001", True)]
    assert [p["sha"] for p in payloads("commit")] == [git.head(seeded.worktree)]
    assert all({"task_id", "stage", "sha"} <= set(p) for p in payloads("stage_completed"))
    assert payloads("stop") == [{"reason": "all_done", "detail": "all tasks complete"}]
