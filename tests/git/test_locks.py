"""A git call killed on its timeout leaves no ``index.lock``; another git's lock is kept.

Real git, real processes: a clean filter that sleeps makes ``git add`` hold the index lock
for as long as the test needs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tilth import git
from tilth.errors import GitError
from tilth.git import locks

SLOW_FILTER = ("-c", "filter.slow.clean=sleep 60")


@pytest.fixture(autouse=True)
def identity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test User")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "test@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test User")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "test@example.invalid")


def _slow_file(repo: Path) -> None:
    """``slow.txt``, whose ``git add`` runs a clean filter that sleeps (holding the lock)."""
    (repo / ".gitattributes").write_text("slow.txt filter=slow\n")
    (repo / "slow.txt").write_text("content\n")


def test_a_timed_out_git_leaves_no_index_lock(repo: Path) -> None:
    _slow_file(repo)
    lock = repo / ".git" / "index.lock"
    with pytest.raises(GitError) as info:
        git.git(*SLOW_FILTER, "add", "slow.txt", cwd=repo, timeout=1.5)
    assert info.value.returncode == -9
    assert "timed out" in str(info.value) and "index.lock" in str(info.value)
    assert not lock.exists()
    # The next git call that writes the index works (it failed on the lock before).
    git.git("add", "README.md", cwd=repo)
    assert git.git("status", "--porcelain", cwd=repo).strip().startswith("?? ")


def test_a_lock_another_live_git_holds_is_kept(repo: Path, tmp_path: Path) -> None:
    _slow_file(repo)
    lock = repo / ".git" / "index.lock"
    other = subprocess.Popen(
        ["git", *SLOW_FILTER, "add", "slow.txt"],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        for _ in range(200):
            if lock.exists():
                break
            time.sleep(0.025)
        assert lock.exists(), "the other git never took the index lock"
        before = lock.stat().st_ino
        # Tilth's own git call times out meanwhile (a command that waits; no lock of its own).
        pidfile = tmp_path / "pid"
        with pytest.raises(GitError):
            git.git("-c", f"alias.wait=!echo $$ > {pidfile}; sleep 60", "wait", cwd=repo, timeout=1)
        assert lock.exists() and lock.stat().st_ino == before
        assert other.poll() is None
    finally:
        os.killpg(other.pid, signal.SIGKILL)  # git and its filter
        other.wait()


def test_a_stale_lock_nobody_holds_is_not_removed(repo: Path) -> None:
    lock = repo / ".git" / "index.lock"
    lock.write_text("")  # left by something else: not Tilth's to judge
    with pytest.raises(GitError):
        git.git("-c", "alias.wait=!sleep 60", "wait", cwd=repo, timeout=1)
    assert lock.exists()


def test_held_locks_names_only_the_groups_open_lock_files(repo: Path) -> None:
    _slow_file(repo)
    other = subprocess.Popen(
        ["git", *SLOW_FILTER, "add", "slow.txt"],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        lock = repo / ".git" / "index.lock"
        for _ in range(200):
            if locks.held_locks(other.pid):
                break
            time.sleep(0.025)
        held = locks.held_locks(other.pid)
        assert [Path(h.path) for h in held] == [lock.resolve()]
        assert locks.held_locks(other.pid + 10_000_000) == []
    finally:
        os.killpg(other.pid, signal.SIGKILL)  # git and its filter
        other.wait()
    # Dead now, and its lock left: the same file, so it goes.
    assert lock.exists()
    assert locks.remove_left(held) == [lock.resolve()]
    assert not lock.exists()
