"""Fixtures for timeline tests: simulated runs built once, cloned per test."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import make_repo, run_cli, run_cli_in_process
from tests.timeline.simrun import SimRun, clone_world, finish_run, prep
from tilth.session.store import Session


@dataclass
class World:
    """A repo + sessions tree holding one simulated session."""

    root: Path
    session: Session
    sim: SimRun | None = None

    @property
    def sessions_dir(self) -> Path:
        return self.root / "sessions"

    def cli(self, *args: str, **env: str):  # type: ignore[no-untyped-def]
        """Run the real CLI against this world's sessions dir."""
        return run_cli(*args, env={"TILTH_SESSIONS_DIR": str(self.sessions_dir), **env})

    def cli_here(self, *args: str, **env: str):  # type: ignore[no-untyped-def]
        """The CLI in this process (parsing and printing only; no signals)."""
        return run_cli_in_process(*args, env={"TILTH_SESSIONS_DIR": str(self.sessions_dir), **env})


def build_world(root: Path, tiers: tuple[str, ...], turns: int, *, run: bool = True) -> World:
    repo = make_repo(root / "repo", {"README.md": "# demo\n", ".gitignore": "*.pyc\n"})
    session = prep(root / "sessions", repo, tiers)
    sim = SimRun(session, turns=turns)
    if run:
        sim.run()
        finish_run(session)
    return World(root, session, sim)


@pytest.fixture
def clean_env(tilth_home: Path) -> Path:
    """No TILTH_* from outside, git identity set (via the shared tilth_home fixture)."""
    return tilth_home


@pytest.fixture(scope="session")
def base_worlds(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., World]:
    """``base_worlds(tiers, turns)``: a finished simulated run, built once per worker (tests
    change only their ``world_clone``; the worlds are the same for every module)."""
    cache: dict[tuple[tuple[str, ...], int, bool], World] = {}

    def get(tiers: tuple[str, ...] = ("L1", "L1"), turns: int = 2, run: bool = True) -> World:
        key = (tiers, turns, run)
        if key not in cache:
            root = tmp_path_factory.mktemp("base") / "w"
            cache[key] = build_world(root, tiers, turns, run=run)
        return cache[key]

    return get


@pytest.fixture
def world_clone(
    base_worlds: Callable[..., World], tmp_path: Path, clean_env: Path
) -> Callable[..., World]:
    """A private copy of a base world, safe to change."""
    count = 0

    def make(tiers: tuple[str, ...] = ("L1", "L1"), turns: int = 2, run: bool = True) -> World:
        nonlocal count
        count += 1
        base = base_worlds(tiers, turns, run)
        dst = tmp_path / f"clone{count}"
        session = clone_world(base.root, dst, base.session)
        return World(dst, session, base.sim)

    return make
