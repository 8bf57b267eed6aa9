"""Retention: pruning turn checkpoints by age and size, and never sweeping a referenced blob."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.conftest import make_repo
from tests.timeline.rewind.test_capture_rewind import Driver, _cli
from tests.timeline.simrun import prep
from tilth.config import Settings, load_settings
from tilth.timeline import list_checkpoints
from tilth.timeline.record.blob_store import BlobStore, split_entry
from tilth.timeline.record.retention import collect


def _settings(home: Path, sessions: Path, **env: str) -> Settings:
    return load_settings({"TILTH_HOME": str(home), "TILTH_SESSIONS_DIR": str(sessions), **env})


def _driver(root: Path, sessions: Path, turns: int) -> Driver:
    repo = make_repo(root / "repo", {"README.md": "# r\n"})
    driver = Driver(prep(sessions, repo, ("L1",)))
    for n in range(turns):
        driver.turn(
            ("write_file", {"path": f"f{n}.txt", "content": f"unique content {n} {root}\n"})
        )
    return driver


def _referenced(*drivers: Driver) -> set[str]:
    return {
        split_entry(entry)[0]
        for d in drivers
        for cp in list_checkpoints(d.session)
        for entry in cp.overlay.values()
        if entry
    }


def test_size_budget_prunes_old_turns_but_never_a_referenced_blob(
    tilth_home: Path, tmp_path: Path
) -> None:
    here = _driver(tmp_path / "a", tilth_home / "sessions", 3)
    elsewhere = _driver(tmp_path / "b", tmp_path / "other-sessions", 2)
    store = BlobStore.for_home(tilth_home)
    kinds_before = [cp.kind for cp in list_checkpoints(here.session)]
    stray = store.put(b"nobody refers to me")

    dry = collect(
        _settings(tilth_home, tilth_home / "sessions", TILTH_CHECKPOINT_MAX_BYTES="0"),
        grace_seconds=0,
        dry_run=True,
    )
    assert dry.checkpoints_pruned and store.has(stray)
    assert [cp.kind for cp in list_checkpoints(here.session)] == kinds_before

    report = collect(
        _settings(tilth_home, tilth_home / "sessions", TILTH_CHECKPOINT_MAX_BYTES="0"),
        grace_seconds=0,
    )
    # Every session's newest checkpoint stays, and no seed/task/stage checkpoint is touched.
    for driver in (here, elsewhere):
        kept = list_checkpoints(driver.session)
        assert [cp.kind for cp in kept].count("turn") == 1
        assert kept[-1].kind == "turn"
        assert "seed" in [cp.kind for cp in kept]
    assert len(report.checkpoints_pruned) == 3, "2 + 1 older turns across both sessions dirs"
    referenced = _referenced(here, elsewhere)
    assert referenced and all(store.has(blob) for blob in referenced)
    assert not store.has(stray)
    # What is left still restores.
    latest = list_checkpoints(here.session)[-1]
    result = _cli(tilth_home / "sessions", "rewind", here.session.id, "--to", latest.id, "-y")
    assert result.returncode == 0, result.stderr
    assert (here.worktree / "f2.txt").exists()


def test_age_budget_and_grace_period(tilth_home: Path, tmp_path: Path) -> None:
    driver = _driver(tmp_path / "a", tilth_home / "sessions", 3)
    store = BlobStore.for_home(tilth_home)
    fresh = store.put(b"being written by a turn right now")
    settings = _settings(tilth_home, tilth_home / "sessions")
    untouched = collect(settings)
    assert untouched.checkpoints_pruned == [] and store.has(fresh)
    later = datetime.now(UTC) + timedelta(days=31)
    aged = collect(settings, now=later)
    assert len(aged.checkpoints_pruned) == 2
    assert store.has(fresh), "younger than the grace period"
    assert all(store.has(blob) for blob in _referenced(driver))


def test_blobs_named_by_an_in_flight_journal_survive(tilth_home: Path, tmp_path: Path) -> None:
    driver = _driver(tmp_path / "a", tilth_home / "sessions", 1)
    store = BlobStore.for_home(tilth_home)
    kept = store.put(b"the user's edit, stashed for a rewind in progress")
    journal = driver.session.dir / "timeline" / "journal.json"
    journal.write_text(json.dumps({"plan": {"keep": {"notes.md": kept}, "overlay": {}}}))
    collect(_settings(tilth_home, tilth_home / "sessions"), grace_seconds=0)
    assert store.has(kept)
    journal.unlink()
    collect(_settings(tilth_home, tilth_home / "sessions"), grace_seconds=0)
    assert not store.has(kept)


def test_checkpoints_gc_through_the_cli(tilth_home: Path, tmp_path: Path) -> None:
    driver = _driver(tmp_path / "a", tilth_home / "sessions", 3)
    result = _cli(
        tilth_home / "sessions", "checkpoints", "--gc", "--json", TILTH_CHECKPOINT_MAX_BYTES="0"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert len(report["checkpoints_pruned"]) == 2
    store = BlobStore.for_home(tilth_home)
    assert all(store.has(blob) for blob in _referenced(driver))
    plain = _cli(tilth_home / "sessions", "checkpoints", "--gc")
    assert plain.returncode == 0 and "pruned 0 turn checkpoint(s)" in plain.stdout
