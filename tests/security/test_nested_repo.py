"""A git repository the worker makes inside its worktree runs nothing through Tilth's git.

The worker may ``git init`` a directory of the worktree (it is writable) and give that
repository a filter driver. Once Tilth's stage commit records it as a submodule, every
``git status`` or ``git add -A`` Tilth ran in the worktree asked git inside it whether its
files changed, and that git ran the worker's filter: outside the sandbox, as the user.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from agent.support import GOOD, TASKS, model_env, recipes, seed_session, team_server, tilth

from security.conftest import require_sandbox
from tests.conftest import git, make_repo
from tilth import git as tilth_git
from tilth.demo.script import Recipe, Team
from tilth.model.script import tool_call
from tilth.timeline.rewind.change_report import tree_changes


def nested_repo_command(marker: Path) -> str:
    """A shell line making ``sub/``, a repository whose clean filter leaves ``marker``."""
    return (
        "mkdir sub && cd sub && git init -q && "
        # (quietly: the sandbox's refusals would push 'nested-made' out of the event preview)
        f"git config filter.x.clean \"sh -c 'env 2>/dev/null > {marker}; cat'\" && "
        "echo '* filter=x' > .gitattributes && echo hi > f && git add -A && "
        "git -c user.name=w -c user.email=w@x commit -qm s && "
        # Same size, new time: git must read the file (through the filter) to know it is clean.
        "touch -d '+1 hour' f && echo nested-made"
    )


@pytest.mark.sandbox_backend  # a run: its worker inside the backend `auto` picks
def test_a_nested_repositorys_filter_never_runs_from_a_run(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    require_sandbox()
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    marker = tmp_path / "filter-ran.txt"  # outside the worktree: the sandbox cannot write it
    recipe = Recipe(GOOD["T-001"], test_command="true")
    recipe.probes = [tool_call("bash", command=nested_repo_command(marker))]
    with team_server(Team(recipes(T_001=recipe))) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url))
    assert result.returncode == 0, result.stdout + result.stderr
    results = " ".join(str(e.payload) for e in seeded.events() if e.type == "tool_result")
    assert "nested-made" in results
    assert not marker.exists(), marker.read_text()[:300]
    assert seeded.statuses() == {"T-001": "done"}


def test_tilths_git_never_runs_git_inside_a_nested_repository(tmp_path: Path) -> None:
    """Each worktree operation of ``tilth.git`` (and the rewind's reports), on a worktree
    holding such a submodule, its files' stat info stale each time."""
    marker = tmp_path / "filter-ran.txt"
    outer = make_repo(tmp_path / "outer", {"a.txt": "a\n"})
    sub = outer / "sub"
    sub.mkdir()
    git(sub, "init", "-q")
    git(sub, "config", "filter.x.clean", f"sh -c 'echo ran >> {marker}; cat'")
    (sub / ".gitattributes").write_text("* filter=x\n")
    (sub / "f").write_text("hi\n")
    git(sub, "add", "-A")
    git(sub, "commit", "-qm", "s")
    git(outer, "add", "-A")
    git(outer, "commit", "-qm", "embed")
    head = tilth_git.head(outer)

    def stale() -> None:
        git(sub, "-c", "core.hooksPath=/dev/null", "status")  # refresh the nested index...
        marker.unlink(missing_ok=True)
        tick = (sub / "f").stat().st_mtime + 3600
        os.utime(sub / "f", (tick, tick))  # ...then make its stat info stale again

    ran = []
    operations: dict[str, Callable[[], object]] = {
        "is_dirty": lambda: tilth_git.is_dirty(outer),
        "diff_with_untracked": lambda: tilth_git.diff_with_untracked(outer),
        "changed_paths": lambda: tilth_git.changed_paths(outer),
        "tree_changes": lambda: tree_changes(outer, head),
        "commit_all": lambda: tilth_git.commit_all(outer, "more", allow_empty=True),
        "stash": lambda: tilth_git.stash(outer, "x", ref="refs/tilth/stash/t"),
    }
    for name, operation in operations.items():
        stale()
        operation()
        if marker.exists():
            ran.append(name)
    assert ran == []


def embedded_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A repository whose ``sub/`` is a repository of its own with one commit, recorded in
    the outer one as a gitlink: ``(outer, sub)``."""
    outer = make_repo(tmp_path / "outer", {"a.txt": "a\n"})
    sub = outer / "sub"
    sub.mkdir()
    git(sub, "init", "-q")
    (sub / "f").write_text("one\n")
    git(sub, "add", "-A")
    git(sub, "commit", "-qm", "one")
    assert tilth_git.commit_all(outer, "embed") is not None
    return outer, sub


def test_a_nested_repositorys_new_commit_is_still_recorded(tmp_path: Path) -> None:
    outer, sub = embedded_repo(tmp_path)
    (sub / "f").write_text("two\n")
    git(sub, "commit", "-qam", "two")
    moved = git(sub, "rev-parse", "HEAD").strip()
    assert tilth_git.is_dirty(outer)
    assert tilth_git.commit_all(outer, "moved") is not None
    assert git(outer, "ls-tree", "HEAD", "sub").split()[2] == moved
    assert not tilth_git.is_dirty(outer)
    shutil.rmtree(sub)
    (outer / "b.txt").write_text("b\n")
    assert tilth_git.commit_all(outer, "gone") is not None
    assert git(outer, "ls-tree", "--name-only", "HEAD").split() == ["a.txt", "b.txt"]


def test_a_nested_repository_with_a_huge_pointer_file_is_read_safely(tmp_path: Path) -> None:
    """Its ``.git`` a file of 8 GB (sparse): reading it whole would take Tilth down."""
    outer, sub = embedded_repo(tmp_path)
    shutil.rmtree(sub / ".git")
    with open(sub / ".git", "wb") as handle:
        handle.truncate(8 * 1024**3)
    (outer / "c.txt").write_text("c\n")
    assert tilth_git.commit_all(outer, "with a huge pointer") is not None
