"""``tilth run`` choosing what to run: one prepared session, none, several; TTY and not."""

from __future__ import annotations

import os
import pty
import select
import time
from pathlib import Path

from agent.support import TASKS, model_env, seed_session, tilth

from tests.warm_cli import shared
from tilth.session.discovery import session_ids

UNREACHABLE = model_env("http://127.0.0.1:9/v1")


def test_several_prepared_sessions_are_refused_and_listed(repo: Path, sessions_dir: Path) -> None:
    first = seed_session(sessions_dir, repo, TASKS[:1])
    second = seed_session(sessions_dir, repo, TASKS[:1])
    result = tilth("run", str(repo), env=UNREACHABLE)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "2 prepared sessions" in result.stderr
    assert first.session.id in result.stdout and second.session.id in result.stdout
    assert "tilth reset" in result.stdout
    assert first.session.status == second.session.status == "prepared"


def test_nothing_prepared_without_a_terminal_names_the_next_command(
    repo: Path, sessions_dir: Path
) -> None:
    result = tilth("run", str(repo), env=UNREACHABLE)
    assert result.returncode == 2
    assert f"no prepared session for {repo}" in result.stderr
    assert f"tilth prep-feature {repo}" in result.stdout
    assert session_ids(sessions_dir) == []


def test_nothing_prepared_but_a_resumable_session_points_at_resume(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    seeded.session.set_status("failed")
    seeded.session.log("stop", reason="iter_cap")
    result = tilth("run", str(repo), env=UNREACHABLE)
    assert result.returncode == 2
    assert f"session {seeded.session.id} is resumable (iter_cap)" in result.stderr
    assert f"tilth resume {seeded.session.id}" in result.stdout
    assert f"tilth reset {seeded.session.id} -y" in result.stdout
    assert seeded.session.status == "failed"


def test_a_sessions_own_worktree_is_not_taken_for_the_users_repository(
    repo: Path, sessions_dir: Path
) -> None:
    """`cd` into a session's worktree to look at the work, then `tilth run .`: it says whose
    worktree that is, instead of offering to prep a session of the session."""
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    for verb in ("run", "prep-feature"):
        result = tilth(verb, str(seeded.worktree), env=UNREACHABLE)
        assert result.returncode == 2
        assert f"is the worktree of Tilth session {seeded.session.id}" in result.stderr
        assert f"give your repository instead: {repo}" in result.stderr
        assert f"tilth resume {seeded.session.id}" in result.stderr
    assert session_ids(sessions_dir) == [seeded.session.id]


def test_not_a_repository_is_a_usage_error(tmp_path: Path, tilth_home: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    result = tilth("run", str(plain), env=UNREACHABLE)
    assert result.returncode == 2
    assert "not a git repository" in result.stderr
    assert "Traceback" not in result.stderr


def _on_a_terminal(args: list[str], answer: bytes, env: dict[str, str]) -> tuple[int, str]:
    """Run the CLI with a pseudo-terminal as stdin/stdout; type ``answer`` at the prompt."""
    leader, follower = pty.openpty()
    child = shared().popen(
        args, stdin=follower, stdout=follower, stderr=follower, env={**os.environ, **env}
    )
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 60
    answered = False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        if not answered and b"> " in seen:
            os.write(leader, answer)
            answered = True
        if child.poll() is not None and not ready:
            break
    os.close(leader)
    return child.wait(timeout=30), seen.decode(errors="replace")


def test_the_picker_on_a_terminal_can_be_cancelled(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    seeded.session.set_status("running")
    seeded.session.log("stop", reason="wall_clock")
    code, screen = _on_a_terminal(["run", str(repo)], b"0\n", UNREACHABLE)
    assert code == 0, screen
    assert "a prior session is resumable" in screen
    assert "resume that session" in screen
    assert "cancelled" in screen
    assert seeded.session.status == "running"
    assert session_ids(sessions_dir) == [seeded.session.id]


def test_nothing_prepared_while_the_prior_session_is_running_names_its_holder(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    seeded.session.set_status("running")
    seeded.session.log("stop", reason="interrupted")
    with seeded.session.lock():
        result = tilth("run", str(repo), env=UNREACHABLE)
    assert result.returncode == 2
    assert f"session {seeded.session.id} is in use by pid {os.getpid()}" in result.stderr
    assert "is resumable" not in result.stderr
    assert "tilth resume" not in result.stdout


def test_a_second_run_while_an_older_session_runs_names_the_live_one(
    repo: Path, sessions_dir: Path
) -> None:
    """Two `tilth run` at once: the second is told which session is running, not pointed at a
    newer stopped session (a fork, say) as if that were what it should resume."""
    live = seed_session(sessions_dir, repo, TASKS[:1])
    live.session.set_status("running")
    stopped = seed_session(sessions_dir, repo, TASKS[:1])
    stopped.session.set_status("running")
    stopped.session.log("stop", reason="interrupted")
    with live.session.lock():
        result = tilth("run", str(repo), env=UNREACHABLE)
    assert result.returncode == 2
    assert f"session {live.session.id} is in use by pid {os.getpid()}" in result.stderr
    assert "is resumable" not in result.stderr
