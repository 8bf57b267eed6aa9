"""SPEC §6 from outside: per-stage commits and events, rejections, and `tilth restart`."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

from tests.e2e.lab import EAGER_MODEL, Lab, Live, bodies, git, tool_names

L1 = ["planning", "implementing", "code_review", "verifying"]
L2 = ["brainstorming", "design_review", *L1]
# T-001's first code review rejects; implementing runs (and commits) a second time
T001 = ["planning", "implementing", "implementing", "code_review", "verifying"]
ALL = [("T-001", s) for s in T001] + [("T-002", s) for s in L2]


def _task_state(live: Live, task_id: str) -> dict[str, Any]:
    """``tasks/<T-NNN>.json`` (docs/internals.md); a task with no state has no file."""
    path = live.sdir() / "tasks" / f"{task_id}.json"
    data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    return data


def _stage_sha(live: Live, task_id: str, stage: str) -> str:
    shas = [
        e["payload"]["sha"]
        for e in live.of_type("stage_completed")
        if (e["payload"]["task_id"], e["payload"]["stage"]) == (task_id, stage)
    ]
    return str(shas[-1])


def test_each_stage_is_a_commit_in_order_for_l1_and_l2(done: Live) -> None:
    subjects = done.subjects(done.seed_sha())
    assert subjects == [f"task/{t}: complete {s} stage" for t, s in ALL]


def test_stage_completed_events_match_the_commits(done: Live) -> None:
    events = [e["payload"] for e in done.of_type("stage_completed")]
    assert [(e["task_id"], e["stage"]) for e in events] == ALL
    commits = git(done.worktree(), "rev-list", "--reverse", f"{done.seed_sha()}..HEAD").split()
    assert [e["sha"] for e in events] == commits
    for event in events:
        subject = git(done.worktree(), "log", "-1", "--format=%s", event["sha"]).strip()
        assert subject == f"task/{event['task_id']}: complete {event['stage']} stage"


def test_stage_commits_use_the_configured_identity_or_tilths(done: Live) -> None:
    # the CLI's env sets no GIT_AUTHOR_*; whatever git config says (or Tilth's fallback) wins
    name = git_config(done, "user.name") or "Tilth"
    email = git_config(done, "user.email") or "tilth@localhost"
    for sha in git(done.worktree(), "rev-list", f"{done.seed_sha()}..HEAD").split():
        author = git(done.worktree(), "log", "-1", "--format=%an <%ae>", sha).strip()
        assert author == f"{name} <{email}>"


def git_config(live: Live, key: str) -> str:
    import subprocess

    done = subprocess.run(
        ["git", "config", "--get", key], cwd=live.worktree(), capture_output=True, text=True
    )
    return done.stdout.strip()


def test_a_rejection_goes_back_to_the_producing_stage(done: Live, lab: Lab) -> None:
    rejected = done.of_type("stage_rejected")
    assert len(rejected) == 1
    assert rejected[0]["payload"]["task_id"] == "T-001"
    assert rejected[0]["payload"]["stage"] == "code_review"
    assert rejected[0]["payload"]["back_to"] == "implementing"
    types = done.events()
    at = next(i for i, e in enumerate(types) if e["type"] == "stage_rejected")
    following = next(e for e in types[at:] if e["type"] == "stage_started")
    assert following["payload"]["stage"] == "implementing"
    # the reviewer's concern reached the worker on the way back
    concern = done.of_type("evaluator_verdict")[0]["payload"]["concern"]
    assert any(concern in json.dumps(b["messages"]) for b in lab.notes["requests"]["worker"])


def test_restart_from_a_stage_rolls_back_to_the_previous_stage(done: Live, lab: Lab) -> None:
    before_calls = len(bodies(lab.servers.worker)) + len(bodies(lab.servers.evaluator))
    target = _stage_sha(done, "T-002", "implementing")
    result = done.cli("restart", done.sid, "T-002", "--from", "code_review", "-y")
    assert result.returncode == 0, result.stdout + result.stderr
    text = result.stdout + result.stderr
    assert "code_review" in text and "verifying" in text
    assert done.head() == target
    assert done.porcelain() == ""
    assert done.statuses() == {"T-001": "done", "T-002": "pending"}
    state = _task_state(done, "T-002")
    assert not {"code_review", "verifying"} & set(state.get("outputs", {}))
    assert {"brainstorming", "design_review", "planning", "implementing"} <= set(state["outputs"])
    assert done.of_type("restart"), done.types()[-5:]
    # never auto-runs
    assert len(bodies(lab.servers.worker)) + len(bodies(lab.servers.evaluator)) == before_calls
    assert "stage_started" not in done.types()[-3:]


def test_restart_of_an_earlier_task_rolls_later_tasks_back(done: Live) -> None:
    target = _stage_sha(done, "T-001", "implementing")
    result = done.cli("restart", done.sid, "T-001", "--from", "code_review", "-y")
    assert result.returncode == 0, result.stdout + result.stderr
    assert done.head() == target
    assert done.statuses() == {"T-001": "pending", "T-002": "pending"}
    assert not _task_state(done, "T-002").get("outputs")


def test_restart_without_from_restarts_the_whole_task_and_stashes(done: Live) -> None:
    base = done.of_type("commit")[0]["payload"]["sha"]  # T-001's last commit = T-002's base
    edited = done.worktree() / "textutils" / "slug.py"
    edited.write_text(edited.read_text() + "# my own edit\n")
    result = done.cli("restart", done.sid, "T-002", "-y")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "stash" in (result.stdout + result.stderr).lower()
    assert done.head() == base
    assert done.porcelain() == ""
    # Saved on Tilth's own ref, never in the user's `git stash` (shared by every worktree).
    assert git(done.worktree(), "stash", "list").strip() == ""
    ref = f"refs/tilth/stash/{done.sid}"
    assert ref in result.stdout
    stashed = git(done.worktree(), "show", "-p", ref)
    assert "# my own edit" in stashed
    assert done.statuses()["T-002"] == "pending"
    assert not _task_state(done, "T-002").get("outputs")


def test_restart_from_a_stage_the_task_has_not_completed_is_an_error(failed: Live) -> None:
    head, events = failed.head(), len(failed.events())
    result = failed.cli("restart", failed.sid, "T-001", "--from", "code_review", "-y")
    assert result.returncode not in (0, 3), result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stderr.startswith("error:"), result.stderr
    assert failed.head() == head and len(failed.events()) == events


def test_restart_from_a_stage_outside_the_tasks_tier_is_an_error(done: Live) -> None:
    head = done.head()
    result = done.cli("restart", done.sid, "T-001", "--from", "brainstorming", "-y")
    assert result.returncode not in (0, 3), result.stdout + result.stderr
    assert result.stderr.startswith("error:"), result.stderr
    assert done.head() == head


def test_restart_aborts_an_active_run_of_the_session(prepared: Live, lab: Lab) -> None:
    import time

    from tests.e2e.lab import SLOW_MODEL

    seen = len(bodies(lab.servers.worker))
    child = prepared.popen("run", str(prepared.proj), TILTH_WORKER_MODEL=SLOW_MODEL)
    try:
        deadline = time.monotonic() + 30
        while len(bodies(lab.servers.worker)) == seen and time.monotonic() < deadline:
            assert child.poll() is None, child.communicate()
            time.sleep(0.05)
        assert prepared.statuses()["T-001"] == "in_progress"
        result = prepared.cli("restart", prepared.sid, "T-001", "-y", timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr
        # the run was stopped by the restart, not left working behind its back
        assert child.wait(timeout=30) != 0
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()
    assert prepared.statuses()["T-001"] == "pending"
    assert prepared.head() == prepared.seed_sha()
    assert prepared.porcelain() == ""
    assert prepared.of_type("restart")


def _requests_with(lab: Lab, role: str, text: str) -> list[dict[str, Any]]:
    return [b for b in lab.notes["requests"][role] if text in json.dumps(b["messages"])]


def test_each_stage_output_is_shown_to_later_stages(lab: Lab) -> None:
    brainstorm = "(scripted) Design note for T-002"
    plan = "(scripted) Plan for T-002"
    design_review = [
        b for b in _requests_with(lab, "evaluator", brainstorm) if "design_review" in json.dumps(b)
    ]
    assert design_review, "the design review never saw the brainstorm"
    implementing = [
        b for b in _requests_with(lab, "worker", plan) if "submit_case" in tool_names(b)
    ]
    assert implementing, "the implementing stage never saw the plan"
    code_review = [
        b
        for b in _requests_with(lab, "evaluator", plan)
        if "## Review: code_review" in json.dumps(b)
    ]
    assert code_review, "the code review never saw the plan"


def test_verifying_runs_the_ratchet_of_every_done_task(done: Live) -> None:
    runs = [
        e["payload"]
        for e in done.of_type("tests_run")
        if (e["payload"].get("task_id"), e["payload"].get("stage")) == ("T-002", "verifying")
    ]
    assert runs and runs[-1]["passed"]
    assert set(runs[-1]["files"]) == {
        "tests/test_t001_word_count.py",
        "tests/test_t002_slugify.py",
    }


def test_a_case_is_refused_until_the_seed_tests_pass(prepared: Live, lab: Lab) -> None:
    seen = len(bodies(lab.servers.worker))
    done = prepared.cli(
        "run", str(prepared.proj), TILTH_WORKER_MODEL=EAGER_MODEL, TILTH_MAX_ITERATIONS_PER_TASK="3"
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert prepared.of_type("evaluator_verdict") == []  # nothing went to review
    assert "code_review" not in [e["payload"]["stage"] for e in prepared.of_type("stage_started")]
    # the failing seed-test output went back to the worker
    later = bodies(lab.servers.worker)[seen:]
    answers = [
        m["content"]
        for b in later
        for m in b["messages"]
        if m.get("role") == "tool" and "test_t001_word_count" in str(m.get("content"))
    ]
    assert answers, "the worker never saw why its case was refused"
    assert any("count" in a and ("Error" in a or "failed" in a) for a in answers), answers[0]


def test_restart_confirmation_lists_reruns_commits_and_stash(done: Live) -> None:
    refused = done.cli("restart", done.sid, "T-002", "--from", "code_review")
    assert refused.returncode != 0
    assert done.statuses()["T-002"] == "done"  # nothing happened without -y
    text = refused.stdout + refused.stderr
    assert "code_review" in text and "verifying" in text
    assert re.search(r"\b2\b[^\n]*commit|commit[^\n]*\b2\b", text), text
    assert "stash" in text.lower(), text


def test_restart_falls_back_to_a_full_restart_when_the_stage_commit_is_gone(done: Live) -> None:
    worktree = done.worktree()
    base = done.of_type("commit")[0]["payload"]["sha"]  # T-002's base
    # the user rewrote the session branch: T-002's stage commits no longer exist anywhere
    git(worktree, "reset", "-q", "--hard", base)
    git(worktree, "commit", "-q", "--allow-empty", "-m", "user rewrote history")
    git(done.proj, "reflog", "expire", "--expire=now", "--all")
    git(done.proj, "gc", "-q", "--prune=now")
    gone = _stage_sha(done, "T-002", "implementing")
    missing = subprocess.run(["git", "cat-file", "-e", gone], cwd=worktree, capture_output=True)
    assert missing.returncode != 0
    result = done.cli("restart", done.sid, "T-002", "--from", "code_review", "-y")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warn" in (result.stdout + result.stderr).lower()
    assert done.head() == base
    assert done.statuses()["T-002"] == "pending"
    assert not _task_state(done, "T-002").get("outputs")


def test_commits_fall_back_to_tilths_identity_on_a_fresh_machine(blank: Live) -> None:
    from tests.e2e.lab import ANSWER, build_project
    from tilth.demo.story import BRIEF

    proj = build_project(blank.root)
    fresh = blank.live / "fresh-home"
    fresh.mkdir()
    no_identity = {
        "HOME": str(fresh),
        "XDG_CONFIG_HOME": str(fresh),
        "GIT_CONFIG_GLOBAL": str(fresh / "none"),
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    unset = ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL")
    prep = blank.cli(
        "prep-feature",
        str(proj),
        "--brief",
        BRIEF,
        input_text=ANSWER,
        unset=unset,
        settings=no_identity,
    )
    assert prep.returncode == 0, prep.stdout + prep.stderr
    run = blank.cli(
        "run", str(proj), unset=unset, settings=no_identity, TILTH_MAX_ITERATIONS_PER_TASK="2"
    )
    assert run.returncode == 3, run.stdout + run.stderr
    authors = git(blank.worktree(), "log", "--format=%an <%ae>|%s", "-3").splitlines()
    assert len(authors) == 3  # seed, planning stage, FAILED placeholder
    for line in authors:
        assert line.split("|")[0] == "Tilth <tilth@localhost>", authors
