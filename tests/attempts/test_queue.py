"""The durable queue on SQLite (the default): ``tilth enqueue`` and two ``tilth worker``s,
one killed mid-run; the other continues the session through resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.attempts.queue_support import kill_a_worker_mid_run
from tests.attempts.support import seed_add


@pytest.mark.slow
def test_a_killed_worker_loses_nothing_on_sqlite(
    repo: Path, sessions_dir: Path, tilth_home: Path, tmp_path: Path
) -> None:
    seeded = seed_add(sessions_dir, repo)
    kill_a_worker_mid_run(seeded, {"TILTH_HOME": str(tilth_home)}, tmp_path)
    assert (tilth_home / "queue.sqlite").is_file()
