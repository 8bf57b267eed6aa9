"""A one-task seed whose attempts differ: the scripted worker writes a correct ``add()`` in
one attempt and a wrong one, which never passes, in the others."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.agent.support import Seeded, model_env, team_server
from tilth import git
from tilth.demo.script import Recipe, Team
from tilth.git import worktrees as git_worktrees
from tilth.session.files import atomic_write_json
from tilth.session.store import Session

TASK: dict[str, Any] = {
    "id": "T-001",
    "title": "Add numbers",
    "description": "Add calc.add(a, b) returning a + b.",
    "acceptance_criteria": ["add(2, 3) == 5"],
}
TEST_FILE = (
    "tests/test_t001_add.py",
    "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
)
RIGHT = {"calc.py": "def add(a, b):\n    return a + b\n"}
WRONG = {"calc.py": "def add(a, b):\n    return a - b\n"}


def seed_add(sessions_dir: Path, source: Path, interview_tokens: int = 0) -> Seeded:
    """A ``prepared`` session of ``source`` with the one task and its seed test committed
    (its interview having cost ``interview_tokens``)."""
    session = Session.create(sessions_dir, source)
    session.log("session_start", source=str(source), phase="prep-feature")
    worktree = git_worktrees.ensure_worktree(source, session.workspace_dir, session.branch)
    name, body = TEST_FILE
    (worktree / name).parent.mkdir(parents=True, exist_ok=True)
    (worktree / name).write_text(body)
    sha = git.commit_all(worktree, "seed: 1 task(s) + 1 acceptance test(s)")
    assert sha is not None
    session.save_prd([{**TASK, "status": "pending"}])
    tokens = {"total": interview_tokens}
    atomic_write_json(session.seed_meta_path, {"tldr": "calc", "tokens": tokens})
    session.log("session_prepared", tokens_used=interview_tokens, prd_entries=1)
    session.log("seed_committed", sha=sha, branch=session.branch)
    session.update_checkpoint(
        workspace=str(worktree),
        branch=session.branch,
        status="prepared",
        tokens_used=interview_tokens,
    )
    return Seeded(session, source, worktree, sha)


def differing_team(right: int = 2, count: int = 3) -> Team:
    """Attempt ``right`` writes the correct ``add()``; every other attempt a wrong one."""
    attempts = {n: dict(RIGHT if n == right else WRONG) for n in range(1, count + 1)}
    return Team({"T-001": Recipe(files=dict(WRONG), test_command="true", attempts=attempts)})


def against_differing_team(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``tilth <args>`` with every role at a ``differing_team`` (attempt 2 of 3 passes),
    unsandboxed, four worker turns a task."""
    from tests.conftest import run_cli

    env = model_env("", TILTH_SANDBOX="off", TILTH_MAX_ITERATIONS_PER_TASK="4")
    with team_server(differing_team(right=2)) as server:
        env["TILTH_BASE_URL"] = server.base_url
        return run_cli(*args, env=env, cwd=cwd, timeout=240)


def start_run(repo: Path, env: dict[str, str], cwd: Path, *options: str) -> subprocess.Popen[str]:
    """``tilth run <repo> <options>`` in a process group of its own (a signal to the group
    reaches the whole run, as a terminal's Ctrl-C does), stdin closed, its output in one pipe."""
    return subprocess.Popen(
        [sys.executable, "-m", "tilth", "run", str(repo), *options],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
