"""SPEC §5.3 from outside: resume after a failure, reset, and visualize's escaping."""

from __future__ import annotations

import signal
import time

from tests.e2e.lab import SLOW_MODEL, XSS, Lab, Live, bodies, git, prep_that_never_finishes

L1 = ["planning", "implementing", "code_review", "verifying"]
L2 = ["brainstorming", "design_review", *L1]
# T-001's first code review rejects; implementing runs (and commits) a second time
T001_COMMITS = ["planning", "implementing", "implementing", "code_review", "verifying"]


def test_resume_after_a_failure_unwinds_the_placeholder_and_finishes(failed: Live) -> None:
    seed = failed.seed_sha()
    placeholder = failed.of_type("task_failed")[-1]["payload"].get("placeholder_sha")
    assert "FAILED" in failed.subjects(seed)[-1]
    log_before = (failed.sdir() / "events.jsonl").read_bytes()
    done = failed.cli("resume", failed.sid)
    assert done.returncode == 0, done.stdout + done.stderr
    # the event log is append-only: resuming adds to it and never rewrites the past
    assert (failed.sdir() / "events.jsonl").read_bytes().startswith(log_before)
    resumes = failed.of_type("session_resume")
    assert len(resumes) == 1 and resumes[0]["payload"], resumes
    subjects = failed.subjects(seed)
    assert not [s for s in subjects if "FAILED" in s], subjects
    expected = [f"task/T-001: complete {s} stage" for s in T001_COMMITS]
    expected += [f"task/T-002: complete {s} stage" for s in L2]
    assert subjects == expected
    if placeholder:
        branch_commits = git(failed.worktree(), "rev-list", "HEAD").split()
        assert placeholder not in branch_commits
    assert failed.statuses() == {"T-001": "done", "T-002": "done"}
    assert failed.record().status == "all_done"


def test_resume_puts_the_failed_task_back_to_pending(failed: Live) -> None:
    done = failed.cli("resume", failed.sid, TILTH_MAX_WALL_CLOCK_MINUTES="0.0000001")
    assert done.returncode == 3, done.stdout + done.stderr
    assert failed.statuses()["T-001"] in ("pending", "in_progress")
    assert failed.head() == failed.seed_sha()
    assert failed.porcelain() == ""


def test_reset_on_a_pipe_refuses_without_yes_and_with_it_deletes_branch_and_worktree(
    done: Live,
) -> None:
    # one copy of the finished story for both: the refusal changes nothing, so -y then works
    # on exactly what a fresh copy would hold
    refused = done.cli("reset", done.sid)
    assert refused.returncode != 0
    assert "-y" in refused.stdout + refused.stderr
    assert done.sdir().is_dir() and done.worktree().is_dir()
    assert f"session/{done.sid}" in git(done.proj, "branch", "--list")

    sid, sdir = done.sid, done.sdir()
    result = done.cli("reset", sid, "-y")
    assert result.returncode == 0, result.stdout + result.stderr
    assert not sdir.exists()
    assert f"session/{sid}" not in git(done.proj, "branch", "--list")
    assert sid not in git(done.proj, "worktree", "list")
    assert git(done.proj, "status", "--porcelain") == ""


def test_visualize_writes_self_contained_html_with_model_text_escaped(done: Live) -> None:
    page = done.sdir() / "chat.html"
    assert XSS not in page.read_text()  # the one the run wrote
    page.unlink()
    result = done.cli("visualize", done.sid)
    assert result.returncode == 0, result.stdout + result.stderr
    html = page.read_text()
    assert html.lstrip().lower().startswith("<!doctype html")
    assert XSS not in html
    assert "&lt;script&gt;alert(" in html
    # self-contained: nothing fetched from elsewhere
    assert 'src="http' not in html and 'href="http' not in html


def test_a_live_resume_reads_running_and_holds_the_session(failed: Live, lab: Lab) -> None:
    seen = len(bodies(lab.servers.worker))
    child = failed.popen("resume", failed.sid, TILTH_WORKER_MODEL=SLOW_MODEL)
    try:
        deadline = time.monotonic() + 30
        while len(bodies(lab.servers.worker)) == seen and time.monotonic() < deadline:
            assert child.poll() is None, child.communicate()
            time.sleep(0.05)
        assert failed.record().status == "running"
        second = failed.cli("resume", failed.sid)
        assert second.returncode == 2, second.stdout + second.stderr
        assert "in use" in second.stderr
        child.send_signal(signal.SIGINT)
        child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 130


def test_resume_of_a_session_whose_prep_never_finished_is_a_clean_error(blank: Live) -> None:
    sid = prep_that_never_finishes(blank)
    result = blank.cli("resume", sid)
    assert result.returncode not in (0, 3), result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stderr.startswith("error:"), result.stderr
    assert "prep" in result.stderr


def test_resume_continues_an_interrupted_task_mid_way(interrupted: Live) -> None:
    seed = interrupted.seed_sha()
    assert interrupted.subjects(seed) == ["task/T-001: complete planning stage"]
    done = interrupted.cli("resume", interrupted.sid)
    assert done.returncode == 0, done.stdout + done.stderr
    events = interrupted.events()
    at = max(i for i, e in enumerate(events) if e["type"] == "session_resume")
    first = next(e for e in events[at:] if e["type"] == "stage_started")["payload"]
    assert (first["task_id"], first["stage"]) == ("T-001", "implementing")
    subjects = interrupted.subjects(seed)
    assert subjects.count("task/T-001: complete planning stage") == 1
    assert subjects[-1] == "task/T-002: complete verifying stage"
    assert interrupted.statuses() == {"T-001": "done", "T-002": "done"}
