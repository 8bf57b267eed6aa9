"""Every stage commit lands on session/<id>: off it, the run stops with the fix to run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import git
from tilth import git as tilth_git
from tilth.agent.branch_guard import OffBranch, require_session_branch

BRANCH = "session/20260101-000000-abcdef"
SID = "20260101-000000-abcdef"


@pytest.fixture
def worktree(repo: Path, tmp_path: Path) -> Path:
    path = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", BRANCH, str(path))
    return path


def test_on_the_session_branch_nothing_happens(worktree: Path) -> None:
    require_session_branch(worktree, BRANCH, SID)


def test_another_branch_stops_with_a_checkout(worktree: Path) -> None:
    git(worktree, "checkout", "-q", "-b", "elsewhere")
    with pytest.raises(OffBranch) as caught:
        require_session_branch(worktree, BRANCH, SID)
    assert "is on branch elsewhere" in caught.value.message
    assert f"git -C {worktree} checkout {BRANCH}" in (caught.value.hint or "")
    assert f"tilth resume {SID}" in (caught.value.hint or "")


def test_commits_made_while_detached_are_kept_by_the_fix(worktree: Path) -> None:
    git(worktree, "checkout", "-q", "--detach")
    (worktree / "f.txt").write_text("x\n")
    assert tilth_git.commit_all(worktree, "made while detached") is not None
    with pytest.raises(OffBranch) as caught:
        require_session_branch(worktree, BRANCH, SID)
    assert "a detached HEAD" in caught.value.message
    assert f"checkout -B {BRANCH}   (keeps the 1 commit(s)" in (caught.value.hint or "")
