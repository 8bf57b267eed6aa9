"""Every stop reason through the real CLI: its event, status and exit code, then a resume."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from agent.support import (
    GOOD,
    TASKS,
    Seeded,
    model_env,
    recipes,
    seed_session,
    team_server,
    tilth,
)
from tests.warm_cli import PIPE, shared
from tilth import git
from tilth.demo.script import Recipe, Team
from tilth.model.script import Reply, delay

ONE_TASK = TASKS[:1]


def _resume_to_all_done(seeded: Seeded) -> Any:
    """Resume with a well-behaved team; the session must finish."""
    with team_server(Team(recipes())) as server:
        result = tilth("resume", seeded.session.id, env=model_env(server.base_url))
    assert result.returncode == 0, result.stdout + result.stderr
    assert seeded.session.status == "all_done"
    assert seeded.statuses() == {"T-001": "done"}
    assert not any("FAILED" in subject for subject in seeded.subjects())
    return next(e for e in reversed(seeded.events()) if e.type == "session_resume")


@pytest.mark.parametrize(
    ("reason", "recipe", "settings", "figures"),
    [
        (
            "iter_cap",
            Recipe(GOOD["T-001"], mode="stall"),
            {"TILTH_MAX_ITERATIONS_PER_TASK": "3"},
            {"turns": 3},
        ),
        (
            "evaluator_cap",
            Recipe(GOOD["T-001"], always_reject=True, test_command="true"),
            {"TILTH_MAX_EVALUATOR_CALLS_PER_TASK": "1"},
            {"evaluator_calls": 1},
        ),
        ("empty_responses", Recipe(GOOD["T-001"], mode="empty"), {}, {"streak": 3}),
        ("no_case", Recipe(GOOD["T-001"], mode="quiet"), {}, {"nudges": 2}),
    ],
)
def test_a_failed_task_halts_with_exit_3_and_resume_retries_it(
    repo: Path,
    sessions_dir: Path,
    reason: str,
    recipe: Recipe,
    settings: dict[str, str],
    figures: dict[str, int],
) -> None:
    seeded = seed_session(sessions_dir, repo, ONE_TASK)
    with team_server(Team(recipes(T_001=recipe))) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url, **settings))
    assert result.returncode == 3, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert seeded.stops() == [reason]
    assert seeded.session.status == "failed"
    assert seeded.statuses() == {"T-001": "failed"}
    head_subject = git.subject("HEAD", seeded.worktree)
    assert head_subject == f"T-001: FAILED ({reason}): Count words"
    placeholder = git.head(seeded.worktree)
    failed = [e.payload for e in seeded.events() if e.type == "task_failed"]
    assert [(f["task_id"], f["reason"]) for f in failed] == [("T-001", reason)]
    # The reference's task_failed carries the figure behind the reason (streak, nudges, calls).
    assert {key: failed[0].get(key) for key in figures} == figures
    assert seeded.session.progress_path.read_text() == f"T-001\tfailed:{reason}\tCount words\n"

    resumed = _resume_to_all_done(seeded)
    assert resumed.payload["last_stop"] == reason
    assert resumed.payload["retried"] == ["T-001"]
    # The reference's unwound_commit is a bool; the sha is an extra field.
    assert resumed.payload["unwound_commit"] is True
    assert resumed.payload["unwound_sha"] == placeholder
    assert seeded.stops() == [reason, "all_done"]


def test_token_cap_stops_resumably_and_resume_continues_mid_task(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, ONE_TASK)
    with team_server(Team(recipes())) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url, TILTH_MAX_TOKENS="1"))
    assert result.returncode == 3, result.stdout + result.stderr
    assert seeded.stops() == ["token_cap"]
    assert seeded.session.status == "running"
    assert seeded.statuses() == {"T-001": "in_progress"}
    assert "TILTH_MAX_TOKENS" in result.stdout + result.stderr
    # The summary says the task is half done (resume continues it), not merely pending.
    assert "tasks     1 total: 0 done, 0 failed, 1 in progress, 0 pending" in result.stdout
    planned = [e for e in seeded.events() if e.type == "stage_completed"]
    assert [e.payload["stage"] for e in planned] == ["planning"]

    resumed = _resume_to_all_done(seeded)
    assert resumed.payload["last_stop"] == "token_cap"
    assert resumed.payload["retried"] == []
    assert resumed.payload["pending"] == ["T-001"]
    stages = [e.payload["stage"] for e in seeded.events() if e.type == "stage_completed"]
    # Planning was not redone: the resumed task continued where it stood.
    assert stages == ["planning", "implementing", "code_review", "verifying"]


def test_wall_clock_stops_resumably(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, ONE_TASK)
    # A budget of a few microseconds is spent before the first cap check: a deterministic trip.
    budget = {"TILTH_MAX_WALL_CLOCK_MINUTES": "0.0000001"}
    with team_server(Team(recipes())) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url, **budget))
        calls = len(server.requests)
    assert result.returncode == 3, result.stdout + result.stderr
    assert seeded.stops() == ["wall_clock"]
    assert seeded.session.status == "running"
    assert calls == 0
    assert seeded.statuses() == {"T-001": "pending"}
    _resume_to_all_done(seeded)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_endpoint_is_a_clean_error_exit_1(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, ONE_TASK)
    env = model_env(f"http://127.0.0.1:{_closed_port()}/v1")
    result = tilth("run", str(repo), env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    # One error line (after the no-sandbox warning on a machine without bubblewrap).
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")], result.stderr
    assert seeded.stops() == ["error"]
    # The reference's stop {reason, error}: the exception, named, for a reader of the log alone.
    (stop,) = [e.payload for e in seeded.events() if e.type == "stop"]
    assert stop["error"].startswith("ModelError: ")
    assert seeded.session.status == "failed"
    resumed = _resume_to_all_done(seeded)
    assert resumed.payload["last_stop"] == "error"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_saves_state_exits_130_and_resume_continues(
    repo: Path, sessions_dir: Path, signum: int
) -> None:
    seeded = seed_session(sessions_dir, repo, ONE_TASK)
    team = Team(recipes())

    def slow_implementing(model: str, request: dict[str, Any]) -> Reply:
        answer = team(model, request)
        names = {t["function"]["name"] for t in request.get("tools") or []}
        if "submit_case" in names:
            return delay(60, answer)
        return answer

    with team_server(slow_implementing) as server:
        env = {**os.environ, **model_env(server.base_url)}
        child = shared().popen(["run", str(repo)], stdout=PIPE, stderr=PIPE, env=env)
        deadline = time.monotonic() + 60
        while not any(
            "submit_case" in str(r["body"].get("tools")) for r in server.requests if r["body"]
        ):
            assert child.poll() is None and time.monotonic() < deadline, child.communicate()
            time.sleep(0.05)
        child.send_signal(signum)
        out, err = child.communicate(timeout=60)
    assert child.returncode == 130, out + err
    assert "Traceback" not in err
    assert seeded.stops() == ["interrupted"]
    assert seeded.session.status == "running"
    assert seeded.statuses() == {"T-001": "in_progress"}
    assert not seeded.session.lock().holder_pid()
    if signum == signal.SIGTERM:
        return  # the same stop as Ctrl-C; resuming it is covered once, below
    resumed = _resume_to_all_done(seeded)
    assert resumed.payload["last_stop"] == "interrupted"
    stages = [e.payload["stage"] for e in seeded.events() if e.type == "stage_completed"]
    assert stages.count("planning") == 1


def test_every_stop_tilth_logs_takes_its_reason_from_the_one_family() -> None:
    """Run and prep-feature log ``stop`` with a ``StopReason``, a chat ends ``all_done`` or
    ``failed`` (logged as ``error``): mypy holds every caller to the family."""
    from typing import Literal, get_type_hints

    from tilth.agent.stops import Stop, StopReason
    from tilth.chat.engine import ChatEngine
    from tilth.seed import prepare
    from tilth.seed.interview import InterviewAbort

    assert get_type_hints(Stop)["reason"] == StopReason
    assert get_type_hints(InterviewAbort.__init__)["reason"] == StopReason
    assert get_type_hints(prepare._fail)["reason"] == StopReason
    assert get_type_hints(ChatEngine.close)["status"] == Literal["all_done", "failed"]
