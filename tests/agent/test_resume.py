"""Resume: the FAILED placeholder unwind (reference bug §12.1-1), plans, and the CLI's cases."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from agent.support import (
    GOOD,
    TASKS,
    evaluator_requests,
    model_env,
    recipes,
    seed_session,
    team_server,
    tilth,
)
from tests.lock_holder import held_elsewhere
from tilth import git
from tilth.agent.resume import failed_placeholder, failed_subject, prepare_resume
from tilth.demo.script import Recipe, Team

PARTIAL = {"textkit/partial.py": "PARTIAL_WORK = 'kept across the failure'\n"}


# ---- the unwind itself ---------------------------------------------------------------------------
def test_resume_soft_resets_a_failed_placeholder_and_keeps_its_work(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo)
    tasks = seeded.prd()
    tasks[2]["status"] = "failed"
    seeded.session.save_prd(tasks)
    (seeded.worktree / "half.py").write_text("x = 1\n")
    placeholder = git.commit_all(
        seeded.worktree, failed_subject("T-003", "iter_cap", "Squash"), allow_empty=True
    )
    assert git.subject("HEAD", seeded.worktree) == "T-003: FAILED (iter_cap): Squash"

    assert prepare_resume(seeded.session, seeded.worktree).unwound_commit == placeholder
    assert git.head(seeded.worktree) == seeded.seed_sha
    # The partial work is back in the index, not lost.
    staged = git.git("diff", "--cached", "--name-only", cwd=seeded.worktree).split()
    assert staged == ["half.py"]


def test_only_a_placeholder_of_a_retried_task_is_unwound(repo: Path) -> None:
    """Finding the placeholder is a pure read: unwinding it is the executor's ``unwind``."""
    (repo / "a.py").write_text("a = 1\n")
    git.commit_all(repo, "task/T-001: complete implementing stage")
    head = git.head(repo)
    assert failed_placeholder(repo, {"T-001"}) is None
    # The reference's check (subject starting with "FAILED (") is not what we match on.
    git.commit_all(repo, "FAILED (iter_cap): not ours", allow_empty=True)
    assert failed_placeholder(repo, {"T-001"}) is None
    git.git("reset", "-q", "--hard", head, cwd=repo)
    # A placeholder of a task that is not being retried stays.
    placeholder = git.commit_all(repo, failed_subject("T-002", "no_case", "x"), allow_empty=True)
    assert failed_placeholder(repo, {"T-003"}) is None
    assert failed_placeholder(repo, {"T-002"}) == placeholder
    assert git.head(repo) == placeholder


def test_prepare_resume_flips_failed_tasks_and_unwinds(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo)
    tasks = seeded.prd()
    tasks[0]["status"], tasks[1]["status"] = "done", "failed"
    seeded.session.save_prd(tasks)
    placeholder = git.commit_all(
        seeded.worktree, failed_subject("T-002", "iter_cap", "Shout"), allow_empty=True
    )
    seeded.session.log("stop", reason="iter_cap")

    plan = prepare_resume(seeded.session, seeded.worktree)
    assert plan.retried == ["T-002"] and plan.pending == ["T-003"]
    assert plan.unwound_commit == placeholder
    assert plan.last_stop == "iter_cap"
    assert plan.text.startswith("retrying T-002 (was: failed); then: T-003; last stop: iter_cap")
    assert seeded.statuses() == {"T-001": "done", "T-002": "pending", "T-003": "pending"}
    assert git.head(seeded.worktree) == seeded.seed_sha


def test_a_task_stopped_mid_way_is_said_to_continue_not_to_be_pending(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo)
    tasks = seeded.prd()
    tasks[0]["status"], tasks[1]["status"] = "done", "in_progress"
    seeded.session.save_prd(tasks)
    seeded.session.log("stop", reason="interrupted")

    plan = prepare_resume(seeded.session, seeded.worktree)
    assert plan.pending == ["T-002", "T-003"]  # the event's list is unchanged (SPEC §4)
    assert plan.text == "continuing T-002 (in progress); then: T-003; last stop: interrupted"


# ---- through the CLI -------------------------------------------------------------------------
def test_retry_after_failure_reviews_the_pre_failure_work(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    # First attempt: writes the code plus a partial file, then runs out of turns.
    first = Recipe({**GOOD["T-001"]}, probes=[], mode="normal", test_command="true")
    first.probes = [
        {"name": "write_file", "arguments": {"path": p, "content": c}} for p, c in PARTIAL.items()
    ]
    with team_server(Team(recipes(T_001=first))) as server:
        failed = tilth(
            "run",
            str(repo),
            env=model_env(server.base_url, TILTH_MAX_ITERATIONS_PER_TASK="2"),
        )
    assert failed.returncode == 3, failed.stdout + failed.stderr
    assert seeded.stops() == ["iter_cap"]
    shown = git.git("show", "--name-only", "--format=%s", "HEAD", cwd=seeded.worktree)
    assert shown.splitlines()[0] == "T-001: FAILED (iter_cap): Count words"
    assert "textkit/partial.py" in shown

    # The retry's worker never writes partial.py; the reviewer must still see it in the diff.
    with team_server(Team(recipes())) as server:
        resumed = tilth("resume", env=model_env(server.base_url))
        reviews = evaluator_requests(server)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"resume: latest session is {seeded.session.id}" in resumed.stderr
    review = json.dumps(reviews[-1]["messages"])
    assert "textkit/partial.py" in review and "PARTIAL_WORK" in review
    assert not any("FAILED" in subject for subject in seeded.subjects())
    implementing = next(
        e.payload["sha"]
        for e in reversed(seeded.events())
        if e.type == "stage_completed" and e.payload["stage"] == "implementing"
    )
    files = git.git("show", "--name-only", "--format=", implementing, cwd=seeded.worktree)
    assert "textkit/partial.py" in files.split()
    event = next(e for e in seeded.events() if e.type == "session_resume")
    assert event.payload["unwound_commit"] and event.payload["retried"] == ["T-001"]


def test_resume_of_a_finished_session_has_nothing_to_do(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    seeded.session.save_prd([{**TASKS[0], "status": "done"}])
    seeded.session.set_status("all_done")
    size = seeded.session.events.size()
    result = tilth("resume", seeded.session.id, env=model_env("http://127.0.0.1:9/v1"))
    assert result.returncode == 0, result.stderr
    assert "nothing to resume" in result.stdout
    # "no-op (besides logging)": the one new line is session_resume with its plan.
    assert seeded.session.events.size() > size
    event = seeded.events()[-1]
    assert event.type == "session_resume"
    assert event.payload["last_stop"] == "all_done"
    assert event.payload["retried"] == [] and event.payload["pending"] == []
    assert event.payload["unwound_commit"] is False
    assert event.payload["plan"] == "no failed or pending tasks; nothing to do; last stop: all_done"
    assert [e.type for e in seeded.events()].count("session_resume") == 1
    assert seeded.session.status == "all_done"


def test_resume_runs_a_prepared_session_and_recreates_a_missing_worktree(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    shutil.rmtree(seeded.worktree)
    with team_server(Team(recipes())) as server:
        result = tilth("resume", seeded.session.id, env=model_env(server.base_url))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "re-created" in result.stderr
    assert "never ran" in result.stdout
    assert seeded.session.status == "all_done"
    assert (seeded.worktree / "textkit/words.py").is_file()
    starts = [e.payload.get("phase") for e in seeded.events() if e.type == "session_start"]
    assert starts == ["prep-feature", "run"]


def test_a_locked_session_is_refused(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    with held_elsewhere(seeded.session) as pid:
        env = model_env("http://127.0.0.1:9/v1")
        for args in (("run", str(repo)), ("resume", seeded.session.id)):
            result = tilth(*args, env=env)
            assert result.returncode == 2, result.stdout + result.stderr
            assert f"in use by pid {pid}" in result.stderr
    assert seeded.session.status == "prepared"
    assert [e.type for e in seeded.events()][-1] == "seed_committed"


def test_resume_after_a_crash_past_the_last_task_just_records_the_stop(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    seeded.session.save_prd([{**TASKS[0], "status": "done"}])
    seeded.session.set_status("running")  # died before logging stop {all_done}
    result = tilth("resume", seeded.session.id, env=model_env("http://127.0.0.1:9/v1"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert seeded.session.status == "all_done"
    assert seeded.stops() == ["all_done"]
