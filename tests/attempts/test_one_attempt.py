"""``--attempts 1`` is the plain run: the event log has the same shape, event for event."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.agent.support import TASKS, model_env, recipes, seed_session, team_server
from tests.conftest import make_repo, run_cli
from tilth.demo.script import Team


def _shape(repo: Path, sessions_dir: Path, *extra: str) -> list[tuple[str, tuple[str, ...]]]:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    with team_server(Team(recipes())) as server:
        env = model_env(server.base_url, TILTH_SANDBOX="off")
        result = run_cli("run", str(repo), *extra, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    shape = [(e.type, tuple(sorted(e.payload))) for e in seeded.events()]
    shutil.rmtree(seeded.session.dir)
    return shape


def test_one_attempt_logs_what_a_plain_run_logs(tmp_path: Path, sessions_dir: Path) -> None:
    files = {"README.md": "# textkit\n", "textkit/__init__.py": ""}
    plain = _shape(make_repo(tmp_path / "a", files), sessions_dir)
    one = _shape(make_repo(tmp_path / "b", files), sessions_dir, "--attempts", "1")
    assert one == plain
    assert not any(kind.startswith("attempt") for kind, _ in one)
