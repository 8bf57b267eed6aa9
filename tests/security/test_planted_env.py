"""A virtualenv the worker plants in its worktree never becomes the project's environment.

SPEC §5.4 puts a worktree virtualenv first: a worker that makes ``.venv/bin/python`` (and
gitignores it, so the diff shows nothing) would have its own program probed by Tilth,
unconfined and with Tilth's environment, on the next ``run`` or ``resume``, and then judge
every later gate. Only a virtualenv that was there before the worker ran counts.
"""

from __future__ import annotations

import json
import site
import venv
from pathlib import Path

import pytest
from agent.support import (
    API_KEY,
    GOOD,
    TASKS,
    Seeded,
    model_env,
    recipes,
    seed_session,
    team_server,
    tilth,
)

from security.conftest import require_sandbox
from tests.conftest import make_repo
from tilth.demo.script import Recipe, Team
from tilth.environment.project import resolve_project_env
from tilth.environment.worktree_env import record_worktree_env, trusted_worktree_env
from tilth.model.script import tool_call

WRONG = {"textkit/words.py": "def count_words(text):\n    return 0\n"}
REPORT = '{"version": 1, "exit": 0, "collected": ["t"], "outcomes": {"t": "passed"}}'


def fake_python(marker: Path) -> str:
    """An 'interpreter' that records who ran it and says yes to everything."""
    return (
        "#!/bin/sh\n"
        f"env >> {marker}\n"
        'if [ "$1" = "-c" ]; then echo /usr; exit 0; fi\n'  # the probe: a prefix, pytest found
        f"echo '{REPORT}' > \"$2\"\n"  # the gate's launcher: a report of a pass
        "echo '1 passed'\n"
    )


def _planting_team(marker: Path) -> Team:
    files = {**WRONG, ".venv/bin/python": fake_python(marker), ".venv/.gitignore": "*\n"}
    recipe = Recipe(files, test_command="true")
    recipe.probes = [tool_call("bash", command="chmod +x .venv/bin/python")]
    return Team(recipes(T_001=recipe))


@pytest.fixture
def planted(repo: Path, sessions_dir: Path, tmp_path: Path) -> tuple[Seeded, Path, dict[str, str]]:
    """A run whose worker planted a fake .venv and ran out of turns; the resume comes next."""
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    marker = tmp_path / "fake-python-ran.txt"  # outside the worktree: the sandbox cannot write it
    team = _planting_team(marker)
    with team_server(team) as server:
        env = model_env(server.base_url, TILTH_MAX_ITERATIONS_PER_TASK="4")
        first = tilth("run", str(repo), env=env)
    assert first.returncode == 3, first.stdout + first.stderr
    assert (seeded.worktree / ".venv/bin/python").exists()
    assert seeded.statuses() == {"T-001": "failed"}
    return seeded, marker, env


@pytest.mark.sandbox_backend  # a run: its worker inside the backend `auto` picks
def test_a_planted_venv_is_neither_run_nor_trusted_on_resume(
    planted: tuple[Seeded, Path, dict[str, str]], tmp_path: Path
) -> None:
    seeded, marker, env = planted
    with team_server(_planting_team(marker)) as server:
        resumed = tilth("resume", seeded.session.id, env={**env, "TILTH_BASE_URL": server.base_url})
    assert not marker.exists(), marker.read_text()[:300]
    assert seeded.statuses() == {"T-001": "failed"}, resumed.stdout + resumed.stderr
    (last, *_) = reversed([e.payload for e in seeded.events() if e.type == "environment"])
    assert last["kind"] != "worktree-venv"
    warning = f"not using {seeded.worktree}/.venv: it was not there when the session's environment"
    assert warning in resumed.stderr
    assert API_KEY not in resumed.stdout + resumed.stderr


@pytest.mark.sandbox_backend  # a run: its worker inside the backend `auto` picks
def test_a_venv_there_before_the_worker_is_trusted(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    (seeded.worktree / ".venv" / "bin").mkdir(parents=True)
    (seeded.worktree / ".venv" / "bin" / "python").touch()
    record_worktree_env(seeded.session, seeded.worktree)
    assert trusted_worktree_env(seeded.session, seeded.worktree) == {".venv"}


@pytest.mark.sandbox_backend  # a run: its worker inside the backend `auto` picks
def test_without_a_record_a_session_the_worker_touched_trusts_nothing(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    (seeded.worktree / "venv" / "bin").mkdir(parents=True)
    (seeded.worktree / "venv" / "bin" / "python").touch()
    seeded.session.log("tool_call", tool="bash", call_id="c1", arguments={"command": "true"})
    assert trusted_worktree_env(seeded.session, seeded.worktree) == set()
    record = json.loads((seeded.session.dir / "worktree-env.json").read_text())
    assert record["trusted"] == []


def test_resolution_skips_what_is_not_trusted(tmp_path: Path) -> None:
    from tilth.config import load_settings

    source = make_repo(tmp_path / "source")
    worktree = tmp_path / "worktree"
    for name in (".venv", "venv"):
        (worktree / name / "bin").mkdir(parents=True)
        (worktree / name / "bin" / "python").write_text("#!/bin/sh\nexit 1\n")
    (worktree / "uv.lock").write_text("version = 1\n")
    settings = load_settings({"TILTH_HOME": str(tmp_path / "home")})
    env = resolve_project_env(worktree, source, settings, trusted=set())
    assert env.kind == "python"
    assert env.ignored == tuple(worktree / name for name in (".venv", "uv.lock", "venv"))
    trusted = resolve_project_env(worktree, source, settings, trusted={"venv"})
    assert (trusted.kind, trusted.venv) == ("worktree-venv", worktree / "venv")


@pytest.mark.sandbox_backend  # a run: its worker inside the backend `auto` picks
def test_the_trusted_worktree_venv_is_read_only_to_the_worker(
    repo: Path, sessions_dir: Path
) -> None:
    """The gate runs it, so the worker may use it but not change it (a .pth file in its
    site-packages would run in every gate, and is in no diff)."""
    require_sandbox()
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    env_dir = seeded.worktree / ".venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    (site_dir,) = env_dir.glob("lib/python*/site-packages")
    (site_dir / "tilth-test.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    (site_dir / "sitecustomize.py").write_text(
        "import os\nos.environ.setdefault('PYTEST_DISABLE_PLUGIN_AUTOLOAD', '1')\n"
    )
    (env_dir / ".gitignore").write_text("*\n")
    probe = f"touch {site_dir.relative_to(seeded.worktree)}/evil.pth; echo venv-write-rc=$?"
    recipe = Recipe(GOOD["T-001"], test_command="true")
    recipe.probes = [
        tool_call("bash", command=probe),
        tool_call("bash", command="touch tests/ok.txt"),
    ]
    with team_server(Team(recipes(T_001=recipe))) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url))
    assert result.returncode == 0, result.stdout + result.stderr
    (chosen,) = [e.payload for e in seeded.events() if e.type == "environment"]
    assert chosen["kind"] == "worktree-venv"
    results = " ".join(str(e.payload) for e in seeded.events() if e.type == "tool_result")
    assert "venv-write-rc=1" in results
    assert "Read-only file system" in results or "Permission denied" in results  # bwrap, Landlock
    assert not (site_dir / "evil.pth").exists()
    assert (seeded.worktree / "tests" / "ok.txt").exists()
