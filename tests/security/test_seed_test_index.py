"""The seed tests cannot be changed behind the gate's back: not through git's index (an
entry hidden with ``--skip-worktree``/``--assume-unchanged`` over a forged blob), nor
through the executable bit. Run without a sandbox: with one, the worker cannot write the
index at all; this is the gate's own line of defence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent.support import (
    GOOD,
    TASKS,
    TESTS,
    Seeded,
    model_env,
    recipes,
    seed_session,
    team_server,
    tilth,
    worker_requests,
)

from tilth import git
from tilth.demo.script import Recipe, Team

SEED_TEST, SEED_BODY = TESTS["T-001"]
FORGED = "def test_counts():\n    assert True\n"
FORGE_INDEX = (
    "blob=$(printf 'def test_counts():\\n    assert True\\n' | git hash-object -w --stdin)"
    f" && git update-index --cacheinfo 100644,$blob,{SEED_TEST}"
    f" && git update-index --{{flag}} {SEED_TEST}"
)


def _results(bodies: list[dict[str, Any]]) -> str:
    return json.dumps([m for b in bodies for m in b["messages"] if m.get("role") == "tool"])


def _seed_test_commits(seeded: Seeded) -> list[str]:
    """Commits after the seed that change the seed test (content or mode)."""
    out = git.git(
        "log", "--format=%H", f"{seeded.seed_sha}..HEAD", "--", SEED_TEST, cwd=seeded.worktree
    )
    return out.split()


def _run_with_probe(repo: Path, sessions_dir: Path, command: str) -> tuple[Seeded, Any, str]:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    probe = {"name": "bash", "arguments": {"command": command}}
    recipe = Recipe(files=dict(GOOD["T-001"]), probes=[probe], test_command="true")
    with team_server(Team(recipes(T_001=recipe))) as server:
        env = model_env(server.base_url, TILTH_SANDBOX="off", TILTH_MAX_ITERATIONS_PER_TASK="5")
        result = tilth("run", str(repo), env=env)
        results = _results(worker_requests(server))
    return seeded, result, results


@pytest.mark.parametrize("flag", ["skip-worktree", "assume-unchanged"])
def test_a_forged_index_entry_hidden_from_git_add_is_refused_and_never_committed(
    repo: Path, sessions_dir: Path, flag: str
) -> None:
    seeded, result, results = _run_with_probe(repo, sessions_dir, FORGE_INDEX.format(flag=flag))
    forged = git.git("hash-object", "--stdin", cwd=repo, input_text=FORGED).strip()
    assert git.ok("cat-file", "-e", forged, cwd=repo), "the worker's forgery ran"
    assert (seeded.worktree / SEED_TEST).read_text() == SEED_BODY  # the file is untouched
    assert result.returncode == 3, result.stdout + result.stderr
    assert f"REFUSED: your changes modify the seed test file(s) {SEED_TEST}" in results
    changed = [e for e in seeded.events() if e.type == "seed_tests_changed"]
    assert changed and changed[0].payload["files"] == [SEED_TEST]
    # Not even the FAILED placeholder commits the forged entry.
    assert _seed_test_commits(seeded) == []
    assert git.subject("HEAD", seeded.worktree).startswith("T-001: FAILED")


def test_a_seed_test_made_executable_is_a_change(repo: Path, sessions_dir: Path) -> None:
    seeded, result, results = _run_with_probe(repo, sessions_dir, f"chmod +x {SEED_TEST}")
    assert result.returncode == 3, result.stdout + result.stderr
    assert f"REFUSED: your changes modify the seed test file(s) {SEED_TEST}" in results
    assert f"chmod a-x {SEED_TEST}" in results
    assert not any("complete implementing" in s for s in seeded.subjects())
