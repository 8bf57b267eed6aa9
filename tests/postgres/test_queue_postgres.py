"""The durable queue shared through PostgreSQL (SPEC §11): two ``tilth worker`` processes
take from one queue; the one running the session is ``kill -9``ed mid-run and the other
finishes it; the branch holds each stage commit once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.attempts.queue_support import kill_a_worker_mid_run
from tests.attempts.support import seed_add

pytestmark = pytest.mark.postgres


def test_two_workers_share_one_postgres_queue_and_survive_a_kill(
    repo: Path, sessions_dir: Path, tilth_home: Path, tmp_path: Path, postgres_url: str
) -> None:
    seeded = seed_add(sessions_dir, repo)
    env = {"TILTH_HOME": str(tilth_home), "TILTH_DATABASE_URL": postgres_url}
    kill_a_worker_mid_run(seeded, env, tmp_path)
    assert not (tilth_home / "queue.sqlite").exists()
