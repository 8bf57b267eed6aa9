"""The doctor's story, built once per test process: a real run with T-001 done and T-002
failed on the iteration cap, which ``tests/cli/test_doctor_repair.py``,
``tests/cli/test_damaged_state.py`` and ``tests/session/test_damaged_records.py`` damage
one file at a time. Each test copies the saved story back to the same absolute path (so
worktree links stay valid); the three modules run on one worker (``tests/conftest.py``,
``GROUPS``), so the run is made once, not once per module."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agent.support import TASKS, model_env, recipes, seed_session, team_server, tilth

from tests.conftest import make_repo
from tilth.demo.script import Team
from tilth.session.store import Session


@dataclass
class Story:
    root: Path
    sid: str
    env: dict[str, str]

    @property
    def repo(self) -> Path:
        return self.root / "live" / "repo"

    @property
    def session(self) -> Session:
        return Session(self.sid, self.root / "live" / "home" / "sessions" / self.sid)

    def cli(self, *args: str, **extra: str) -> Any:
        return tilth(*args, env={**self.env, **extra})

    def statuses(self) -> dict[str, str]:
        return {t["id"]: t["status"] for t in self.session.load_prd()}

    def restore(self) -> Story:
        """The saved story copied back in place, undoing what the last test damaged."""
        live = self.root / "live"
        shutil.rmtree(live)
        shutil.copytree(self.root / "saved", live, symlinks=True)
        return self


def story_team() -> Team:
    """The story's team: T-002's worker stalls (so it fails on the iteration cap)."""
    team = Team(recipes())
    team.recipes["T-002"].mode = "stall"
    return team


@pytest.fixture(scope="session")
def saved_story(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    root = tmp_path_factory.mktemp("doctor")
    live = root / "live"
    repo = make_repo(live / "repo", {"README.md": "# textkit\n", "textkit/__init__.py": ""})
    seeded = seed_session(live / "home" / "sessions", repo, TASKS[:2])
    with team_server(story_team()) as server:
        env = model_env(
            server.base_url, TILTH_HOME=str(live / "home"), TILTH_MAX_ITERATIONS_PER_TASK="4"
        )
        story = Story(root, seeded.session.id, env)
        ran = story.cli("run", str(repo))
        assert ran.returncode == 3, ran.stdout + ran.stderr
        assert story.statuses() == {"T-001": "done", "T-002": "failed"}
        shutil.copytree(live, root / "saved", symlinks=True)
        yield story
