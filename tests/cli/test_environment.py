"""The project's environment from the command line: the pre-flight spends no token, the chosen
environment is shown and logged, TILTH_SETUP_COMMAND runs in new worktrees, and a failing
start is logged as ``stop {error}``."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from agent.support import GOOD, TASKS, model_env, recipes, seed_session, team_server, tilth
from seed.support import cli_env, quick_script, session_dirs

from tests.sessionview import SessionView
from tilth import git, git_worktrees
from tilth.demo.script import Team
from tilth.model import FakeServer
from tilth.session.store import Session


def git_only_path(tmp_path: Path) -> str:
    """A PATH with git and nothing else: no python3 anywhere on it."""
    bin_dir = tmp_path / "git-only-bin"
    bin_dir.mkdir()
    git_path = shutil.which("git")
    assert git_path is not None
    (bin_dir / "git").symlink_to(git_path)
    return str(bin_dir)


def test_a_test_command_naming_a_missing_program_exits_2_before_any_model_call(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    with team_server(Team(recipes())) as server:
        result = tilth(
            "run",
            str(repo),
            env=model_env(server.base_url, TILTH_TEST_COMMAND="no-such-runner-1f3 -q {files}"),
        )
        assert server.requests == [], "the pre-flight spends no token"
    assert result.returncode == 2, result.stdout + result.stderr
    error_lines = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert error_lines == [
        "error: TILTH_TEST_COMMAND runs `no-such-runner-1f3`, which is not found "
        "(command: no-such-runner-1f3 -q {files})"
    ]
    assert seeded.session.status == "prepared", "a run that never started stays runnable"
    stop = seeded.events()[-1]
    assert stop.type == "stop"
    assert stop.payload["reason"] == "error" and stop.payload["phase"] == "run"


def test_a_project_without_a_usable_environment_exits_2_with_one_line(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    seed_session(sessions_dir, repo, TASKS[:1])
    with team_server(Team(recipes())) as server:
        result = tilth(
            "run", str(repo), env=model_env(server.base_url, PATH=git_only_path(tmp_path))
        )
        assert server.requests == []
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert line.startswith("error: no Python environment to run the project's tests in; tried:")
    assert "python3 on PATH (none found)" in line
    assert "hint: set TILTH_TEST_COMMAND" in result.stderr
    assert "TILTH_SETUP_COMMAND" in result.stderr


def test_the_chosen_environment_is_shown_logged_and_used_by_the_gate(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    command = "python3 -m pytest -q -p no:cacheprovider {files} && echo GATE-RAN-HERE"
    with team_server(Team(recipes())) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url, TILTH_TEST_COMMAND=command))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"tests in  TILTH_TEST_COMMAND: {command}" in result.stdout
    logged = seeded.payloads("environment")
    assert [p["kind"] for p in logged] == ["command"]
    gates = seeded.payloads("tests_run")
    assert gates and "GATE-RAN-HERE" in str(gates[0])


def test_a_worktree_recreated_by_run_gets_the_setup_command(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    git_worktrees.remove_worktree(repo, seeded.worktree)
    setup = "echo made-by-setup > .setup-marker && echo set up"
    (repo / ".gitignore").write_text(".setup-marker\n")
    with team_server(Team(recipes())) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url, TILTH_SETUP_COMMAND=setup))
    assert result.returncode == 0, result.stdout + result.stderr
    assert (seeded.worktree / ".setup-marker").read_text() == "made-by-setup\n"
    (logged,) = seeded.payloads("setup")
    assert logged["why"] == "run" and logged["ok"] is True
    assert logged["output"] == "set up"
    assert set(GOOD["T-001"]) <= set(git.git("ls-files", cwd=seeded.worktree).split())
    # It may take minutes (a pip install): the user is told before it starts.
    assert f"running TILTH_SETUP_COMMAND in {seeded.worktree}: {setup}" in result.stdout


def test_prep_says_it_runs_the_setup_command_before_the_interview(
    repo: Path, sessions_dir: Path
) -> None:
    setup = "echo set up"
    with FakeServer(quick_script()) as server:
        env = {**cli_env(server), "TILTH_SETUP_COMMAND": setup}
        result = tilth("prep-feature", str(repo), "--brief", "add it", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    (record,) = [Session(p.name, p) for p in session_dirs(sessions_dir)]
    worktree = record.record().workspace
    assert f"running TILTH_SETUP_COMMAND in {worktree}: {setup}" in result.stdout


def test_a_failing_setup_command_in_prep_stops_cleanly_before_the_interview(
    repo: Path, sessions_dir: Path
) -> None:
    failing = "echo installing deps; echo 'no such package: frobnicate' >&2; exit 3"
    with FakeServer(quick_script()) as server:
        env = {**cli_env(server), "TILTH_SETUP_COMMAND": failing}
        result = tilth("prep-feature", str(repo), "--brief", "add it", env=env)
        assert server.requests == [], "no interview without a working set-up"
    assert result.returncode == 2, result.stdout + result.stderr
    assert "installing deps" in result.stderr and "no such package: frobnicate" in result.stderr
    assert (
        "error: TILTH_SETUP_COMMAND failed in the worktree (exit 3): no such package: frobnicate"
        in result.stderr
    )
    (record,) = [Session(p.name, p) for p in session_dirs(sessions_dir)]
    (setup,) = SessionView(record).payloads("setup")
    assert setup["ok"] is False and setup["exit_code"] == 3
    assert "frobnicate" in setup["output"]
    assert record.status == "failed"
    # Nothing half-made: no worktree, no branch; the next prep goes straight ahead.
    assert not record.workspace_dir.exists()
    assert not git_worktrees.branch_exists(repo, record.branch)
    with FakeServer(quick_script()) as server:
        again = tilth("prep-feature", str(repo), "--brief", "add it", env=cli_env(server))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "in flight" not in again.stdout + again.stderr


def test_a_resume_that_fails_before_the_loop_logs_stop_error(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    seeded.session.set_status("running")
    git_worktrees.remove_worktree(repo, seeded.worktree)
    git_worktrees.delete_branch(repo, seeded.session.branch)
    with team_server(Team(recipes())) as server:
        result = tilth("resume", seeded.session.id, env=model_env(server.base_url))
        assert server.requests == []
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"branch {seeded.session.branch} no longer exists" in result.stderr
    stop = seeded.events()[-1]
    assert stop.type == "stop"
    payload = stop.payload
    assert payload["reason"] == "error" and payload["phase"] == "resume"
    assert "no longer exists" in payload["error"]
    assert os.path.isdir(seeded.session.dir)


def test_a_failing_setup_in_a_recreated_worktree_leaves_none_behind(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    git_worktrees.remove_worktree(repo, seeded.worktree)
    with team_server(Team(recipes())) as server:
        broken = tilth(
            "run",
            str(repo),
            env=model_env(server.base_url, TILTH_SETUP_COMMAND="echo cannot build; exit 9"),
        )
        assert server.requests == []
    assert broken.returncode == 2, broken.stdout + broken.stderr
    assert "cannot build" in broken.stderr
    assert not seeded.worktree.exists(), "no worktree without its set-up"
    stop = seeded.events()[-1]
    assert stop.type == "stop" and "cannot build" in str(stop.payload)
    assert seeded.session.status == "prepared"
    with team_server(Team(recipes())) as server:
        fixed = tilth("run", str(repo), env=model_env(server.base_url, TILTH_SETUP_COMMAND="true"))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    setups = [p["ok"] for p in seeded.payloads("setup")]
    assert setups == [False, True]


def test_a_fork_gets_the_setup_command_in_its_new_worktree(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    with team_server(Team(recipes())) as server:
        assert tilth("run", str(repo), env=model_env(server.base_url)).returncode == 0
    setup = "echo forked > .setup-marker"
    result = tilth(
        "fork", seeded.session.id, "--at", "T-001", "--json", env={"TILTH_SETUP_COMMAND": setup}
    )
    assert result.returncode == 0, result.stdout + result.stderr
    child = Session.open(sessions_dir, json.loads(result.stdout)["session_id"])
    assert (child.workspace_dir / ".setup-marker").read_text() == "forked\n"
    (logged,) = SessionView(child).payloads("setup")
    assert logged["why"] == "fork" and logged["ok"] is True
