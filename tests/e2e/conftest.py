"""Fixtures for the e2e suite: the story is built once per test run, then restored per test."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.lab import (
    ANSWER,
    SLOW_IMPLEMENTER,
    STALL_MODEL,
    Lab,
    Live,
    StoryScript,
    bodies,
    build_project,
    interrupt_run,
    start_servers,
)
from tilth.demo.story import BRIEF


def _check(done: subprocess.CompletedProcess[str], code: int, what: str) -> None:
    assert done.returncode == code, f"{what}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """prep-feature (piped answer) → ``prepared``; run → ``done``; a stalled run → ``failed``."""
    patch = pytest.MonkeyPatch()
    for key in list(os.environ):
        if key.startswith("TILTH_"):
            patch.delenv(key)
    root = tmp_path_factory.mktemp("e2e")
    script = StoryScript(root / "outside")
    servers = start_servers(script)
    lab = Lab(root, servers, script)
    try:
        build_project(root)
        world = lab.world
        # The story's commands run as real processes: the worker's env probe reads its
        # parent's environment (/proc/$PPID/environ), which must be the run's own.
        prep = world.cli(
            "prep-feature", str(world.proj), "--brief", BRIEF, input_text=ANSWER, process=True
        )
        _check(prep, 0, "prep-feature")
        lab.notes["prep"] = prep
        lab.save("prepared")

        run = world.cli("run", str(world.proj), process=True)
        _check(run, 0, "run")
        lab.notes["run"] = run
        lab.notes["requests"] = {
            "worker": bodies(servers.worker),
            "evaluator": bodies(servers.evaluator),
            "prep": bodies(servers.prep),
        }
        lab.save("done")

        lab.restore("prepared")
        failed = world.cli(
            "run",
            str(world.proj),
            TILTH_WORKER_MODEL=STALL_MODEL,
            TILTH_MAX_ITERATIONS_PER_TASK="1",
            process=True,
        )
        lab.notes["failed_run"] = failed
        lab.save("failed")

        lab.restore("prepared")
        interrupted, _ = interrupt_run(
            world, servers, "run", str(world.proj), model=SLOW_IMPLEMENTER
        )
        lab.notes["interrupted_run"] = interrupted
        lab.save("interrupted")
        lab.clear()
        yield lab
    finally:
        servers.stop()
        patch.undo()


@pytest.fixture(autouse=True)
def _own_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test in its own empty directory (set between tests, never during a command): the
    in-process CLI reads ``./.env`` from there, never from the checkout."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def prepared(lab: Lab) -> Iterator[Live]:
    """A copy of the story right after prep-feature (status prepared)."""
    yield lab.restore("prepared")
    lab.clear()


@pytest.fixture
def done(lab: Lab) -> Iterator[Live]:
    """A copy of the story after a full run (status all_done, one rejection on T-001)."""
    yield lab.restore("done")
    lab.clear()


@pytest.fixture
def failed(lab: Lab) -> Iterator[Live]:
    """A copy of the story after a run that failed T-001 on the iteration cap."""
    yield lab.restore("failed")
    lab.clear()


@pytest.fixture
def interrupted(lab: Lab) -> Iterator[Live]:
    """A copy of the story after Ctrl-C during T-001's first implementing call."""
    yield lab.restore("interrupted")
    lab.clear()


@pytest.fixture
def blank(lab: Lab, tmp_path: Path) -> Iterator[Live]:
    """Nothing restored: an empty live root for tests that build their own session."""
    lab.clear()
    yield lab.world
    lab.clear()
