"""The git wrapper against real repositories."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tilth.errors import GitError, WorkspaceError
from tilth.git import repo as git
from tilth.git import worktrees as git_worktrees
from tilth.timeline.rewind.change_report import tree_changes

GIT_IDENTITY_VARS = (
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "EMAIL",
)


def sh(cwd: Path, *args: str) -> str:
    """Plain git for assertions, independent of the wrapper under test."""
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def one_file_repo(where: Path, name: str, text: str) -> Path:
    """A new repository at ``where`` with one commit holding ``name``."""
    where.mkdir()
    sh(where, "init", "-q", "-b", "main")
    (where / name).write_text(text)
    sh(where, "add", "-A")
    sh(where, "commit", "-q", "-m", name)
    return where


@pytest.fixture(autouse=True)
def identity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test User")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "test@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test User")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "test@example.invalid")


# ---- ensure_repo --------------------------------------------------------------------------
def test_ensure_repo_returns_the_resolved_top_level(repo: Path) -> None:
    assert git.ensure_repo(repo / "." / "src" / "..") == repo


def test_ensure_repo_missing_path(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError) as info:
        git.ensure_repo(tmp_path / "missing")
    assert "does not exist" in str(info.value) and str(tmp_path / "missing") in str(info.value)
    assert info.value.exit_code == 2
    assert info.value.hint  # every error carries the one thing to do


def test_ensure_repo_file_not_dir(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(WorkspaceError, match="not a directory") as info:
        git.ensure_repo(tmp_path / "f")
    assert info.value.hint


def test_ensure_repo_not_a_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(WorkspaceError) as info:
        git.ensure_repo(plain)
    assert "is not a git repository" in str(info.value)
    assert info.value.hint and "git init" in info.value.hint


def test_a_bare_repository_is_a_usage_error_with_a_hint(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    sh(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    with pytest.raises(WorkspaceError) as info:
        git.ensure_repo(bare)
    assert info.value.exit_code == 2
    assert "is a bare repository" in str(info.value)
    assert info.value.hint and "git clone" in info.value.hint


def test_submodules_are_checked_out_or_named(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert git_worktrees.init_submodules(repo) is None, "no .gitmodules: nothing to do"
    # Local submodule URLs need file transport allowed (git refuses it by default).
    for key, value in {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "protocol.file.allow",
        "GIT_CONFIG_VALUE_0": "always",
    }.items():
        monkeypatch.setenv(key, value)
    lib = one_file_repo(tmp_path / "lib", "lib.py", "X = 1\n")
    sh(repo, "submodule", "add", "-q", str(lib), "lib")
    sh(repo, "commit", "-q", "-m", "add lib")
    worktree = git_worktrees.ensure_worktree(repo, tmp_path / "wt", "session/x")
    assert not (worktree / "lib" / "lib.py").exists(), "a fresh worktree has it empty"
    assert git_worktrees.init_submodules(worktree) is None
    assert (worktree / "lib" / "lib.py").read_text() == "X = 1\n"
    shutil.rmtree(lib)
    other = git_worktrees.ensure_worktree(repo, tmp_path / "wt2", "session/y")
    problem = git_worktrees.init_submodules(other, timeout=30)
    assert problem is not None and "could not check out the submodules" in problem
    assert f"git -C {other} submodule update --init" in problem


def test_a_staged_nested_repository_is_found_in_the_index(repo: Path) -> None:
    """add_all reads the index's bytes to skip asking git for submodules; a nested
    repository staged by git itself must still be seen (and kept at its own commit)."""
    assert git._gitlinks(repo, None) == {}
    nested = one_file_repo(repo / "nested", "n.txt", "n")
    sh(repo, "add", "-A")  # git records it as a gitlink (mode 160000)
    inner = sh(nested, "rev-parse", "HEAD").strip()
    assert git._gitlinks(repo, None) == {"nested": inner}
    (nested / "n.txt").write_text("changed")
    sh(nested, "commit", "-q", "-am", "moved")
    git.add_all(repo)
    moved = sh(nested, "rev-parse", "HEAD").strip()
    assert git._gitlinks(repo, None) == {"nested": moved}


def test_ensure_repo_without_commits(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    sh(empty, "init", "-q", "-b", "main")
    with pytest.raises(WorkspaceError) as info:
        git.ensure_repo(empty)
    assert "no commits yet" in str(info.value)
    assert info.value.hint and "git commit" in info.value.hint


def test_ensure_repo_subdirectory_names_the_root(repo: Path) -> None:
    with pytest.raises(WorkspaceError) as info:
        git.ensure_repo(repo / "src")
    assert "not its top level" in str(info.value)
    assert info.value.hint and str(repo) in info.value.hint


# ---- worktrees ----------------------------------------------------------------------------
def test_ensure_worktree_create_idempotent_and_recreate(repo: Path, tmp_path: Path) -> None:
    target = tmp_path / "sessions" / "s1" / "workspace"
    made = git_worktrees.ensure_worktree(repo, target, "session/s1")
    assert made == target.resolve()
    assert (target / "README.md").is_file()
    assert git_worktrees.branch_exists(repo, "session/s1")
    assert git_worktrees.worktrees(repo)[made] == "session/s1"
    assert git.head(target) == git.head(repo)

    (target / "scratch.txt").write_text("keep me")
    assert git_worktrees.ensure_worktree(repo, target, "session/s1") == made
    assert (target / "scratch.txt").read_text() == "keep me"

    tip = git.commit_all(target, "work on the branch")
    assert tip is not None
    shutil.rmtree(target)
    again = git_worktrees.ensure_worktree(repo, target, "session/s1")
    assert again == made
    assert git.head(target) == tip
    assert (target / "scratch.txt").read_text() == "keep me"
    # The source's own checkout never moved.
    assert sh(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert sh(repo, "status", "--porcelain") == ""


def test_ensure_worktree_over_a_stale_entry_with_a_new_branch(repo: Path, tmp_path: Path) -> None:
    # The quick way (one `worktree add -b`) is refused by the stale entry after making the
    # branch; the careful way then prunes and checks that branch out at the asked start.
    target = tmp_path / "wt"
    git_worktrees.ensure_worktree(repo, target, "session/old")
    start = git.head(target)
    (target / "x.txt").write_text("x")
    assert git.commit_all(target, "moves session/old on") is not None
    shutil.rmtree(target)
    assert target.resolve() in git_worktrees.worktrees(repo)  # stale, not yet pruned
    made = git_worktrees.ensure_worktree(repo, target, "session/new", start=start)
    assert git_worktrees.worktrees(repo)[made] == "session/new"
    assert git.head(target) == start
    assert not (target / "x.txt").exists()


def test_remove_worktree_and_delete_branch(repo: Path, tmp_path: Path) -> None:
    target = tmp_path / "wt"
    git_worktrees.ensure_worktree(repo, target, "session/x")
    (target / "dirty.txt").write_text("uncommitted")
    git_worktrees.remove_worktree(repo, target)
    assert not target.exists()
    assert target.resolve() not in git_worktrees.worktrees(repo)
    assert str(target) not in sh(repo, "worktree", "list")
    assert git_worktrees.delete_branch(repo, "session/x") is True
    assert not git_worktrees.branch_exists(repo, "session/x")
    assert git_worktrees.delete_branch(repo, "session/x") is False
    git_worktrees.remove_worktree(repo, target)  # already gone: no error


def test_remove_worktree_after_manual_delete_prunes(repo: Path, tmp_path: Path) -> None:
    target = tmp_path / "wt"
    git_worktrees.ensure_worktree(repo, target, "session/y")
    shutil.rmtree(target)
    git_worktrees.remove_worktree(repo, target)
    assert target.resolve() not in git_worktrees.worktrees(repo)
    assert git_worktrees.delete_branch(repo, "session/y")


def test_remove_worktree_on_an_unregistered_directory(repo: Path, tmp_path: Path) -> None:
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "f").write_text("x")
    git_worktrees.remove_worktree(repo, stray)
    assert (stray / "f").exists()  # not a worktree of this repo: not ours to delete


# ---- commits and identity -----------------------------------------------------------------
def test_commit_all_commits_everything_or_nothing(repo: Path) -> None:
    assert git.commit_all(repo, "nothing") is None
    (repo / "new.txt").write_text("n")
    (repo / "README.md").write_text("changed\n")
    sha = git.commit_all(repo, "T-001: add things")
    assert sha == git.head(repo) and len(sha) == 40
    assert git.subject("HEAD", repo) == "T-001: add things"
    assert sh(repo, "status", "--porcelain") == ""
    empty = git.commit_all(repo, "marker", allow_empty=True)
    assert empty is not None and empty != sha
    assert git.commits_between(sha, "HEAD", repo) == [(empty, "marker")]
    assert git.is_ancestor(sha, empty, repo)
    assert git.rev_parse("HEAD~1", repo) == sha
    assert git.rev_parse("no-such-ref", repo) is None


def test_odd_git_files_are_read_as_git_reads_them(repo: Path, tmp_path: Path) -> None:
    """Layouts a worker (or an old git) can leave: the branch from the files is git's, or
    git is asked. Found by an adversarial probe of the file reads."""

    def same(where: Path) -> None:
        asked = subprocess.run(
            ["git", "symbolic-ref", "-q", "--short", "HEAD"], cwd=where, capture_output=True
        )
        assert git.current_branch(where) == (asked.stdout.decode().strip() or None)

    linked = tmp_path / "linked"
    sh(repo, "worktree", "add", "-q", "-b", "feat", str(linked))
    pointer = (linked / ".git").read_text()
    (linked / ".git").write_text(pointer.rstrip("\n") + " \n")  # git keeps the space
    (tmp_path / (pointer.split(": ", 1)[1].strip() + " ")).mkdir(parents=True)
    same(linked)
    (linked / ".git").write_text(pointer)
    head = repo / ".git" / "HEAD"
    head.unlink()
    head.symlink_to("refs/heads/main")  # core.preferSymlinkRefs, as old gits wrote it
    same(repo)
    head.unlink()
    head.write_text("ref: refs/heads/main\n")
    same(repo)


def test_commits_apart_is_both_sides_of_commits_between(repo: Path) -> None:
    base = git.head(repo)
    (repo / "a.txt").write_text("a")
    left = git.commit_all(repo, "left one")
    (repo / "a.txt").write_text("aa")
    left2 = git.commit_all(repo, "left two")
    sh(repo, "checkout", "-q", "-b", "other", base)
    (repo / "b.txt").write_text("b")
    right = git.commit_all(repo, "right one")
    assert left and left2 and right
    apart = git.commits_apart(left2, right, repo)
    assert apart == (
        git.commits_between(right, left2, repo),
        git.commits_between(left2, right, repo),
    )
    assert apart == ([(left2, "left two"), (left, "left one")], [(right, "right one")])
    assert git.commits_apart(base, base, repo) == ([], [])
    with pytest.raises(GitError):
        git.commits_apart("0" * 40, right, repo)


def test_identity_fallback_when_none_configured(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty_home = tmp_path / "empty-home"
    empty_home.mkdir()
    monkeypatch.setenv("HOME", str(empty_home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(empty_home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    for name in GIT_IDENTITY_VARS:
        monkeypatch.delenv(name, raising=False)
    assert git.identity_args(repo) == [
        "-c",
        "user.name=Tilth",
        "-c",
        "user.email=tilth@localhost",
    ]
    (repo / "a.txt").write_text("a")
    git.commit_all(repo, "by tilth")
    who = sh(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>").strip()
    assert who == "Tilth <tilth@localhost>|Tilth <tilth@localhost>"


def test_configured_identity_is_used(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in GIT_IDENTITY_VARS:
        monkeypatch.delenv(name, raising=False)
    sh(repo, "config", "user.name", "Repo Owner")
    sh(repo, "config", "user.email", "owner@example.invalid")
    assert git.identity_args(repo) == []
    (repo / "a.txt").write_text("a")
    git.commit_all(repo, "by owner")
    assert (
        sh(repo, "log", "-1", "--format=%an <%ae>").strip() == "Repo Owner <owner@example.invalid>"
    )


def test_only_the_missing_half_of_an_identity_is_supplied(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty_home = tmp_path / "empty-home"
    empty_home.mkdir()
    monkeypatch.setenv("HOME", str(empty_home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    for name in GIT_IDENTITY_VARS:
        monkeypatch.delenv(name, raising=False)
    sh(repo, "config", "user.name", "Half Configured")
    assert git.identity_args(repo) == ["-c", "user.email=tilth@localhost"]
    (repo / "a.txt").write_text("a")
    git.commit_all(repo, "half")
    assert (
        sh(repo, "log", "-1", "--format=%an <%ae>").strip() == "Half Configured <tilth@localhost>"
    )
    assert git.stash(repo, "kept", ref=git.stash_ref("s")) is False
    (repo / "a.txt").write_text("b")
    assert git.stash(repo, "kept", ref=git.stash_ref("s")) is True
    kept = sh(repo, "log", "-1", "--format=%an <%ae>", git.stash_ref("s")).strip()
    assert kept == "Half Configured <tilth@localhost>"
    sh(repo, "config", "author.email", "author@example.invalid")  # not the committer's
    (repo / "a.txt").write_text("c")
    git.commit_all(repo, "author only")
    who = sh(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>").strip()
    assert who == "Half Configured <author@example.invalid>|Half Configured <tilth@localhost>"
    sh(repo, "config", "user.email", "")  # set but empty counts as missing here
    assert git.identity_args(repo) == ["-c", "user.email=tilth@localhost"]


def test_head_is_read_from_the_ref_files_in_every_layout(repo: Path, tmp_path: Path) -> None:
    """Loose, packed, a linked worktree, detached, a symbolic chain, a subdirectory: the
    answer (HEAD's commit and its branch) is always git's own."""

    def same(where: Path) -> None:
        assert git.head(where) == sh(where, "rev-parse", "HEAD").strip()
        asked = subprocess.run(
            ["git", "symbolic-ref", "-q", "--short", "HEAD"],
            cwd=where,
            capture_output=True,
            text=True,
        )
        assert git.current_branch(where) == (asked.stdout.strip() or None)

    same(repo)
    (repo / "a.txt").write_text("a")
    git.commit_all(repo, "one")
    same(repo)
    sh(repo, "pack-refs", "--all")  # the branch now lives in packed-refs only
    assert not any((repo / ".git" / "refs" / "heads").iterdir())
    same(repo)
    linked = tmp_path / "linked"
    sh(repo, "worktree", "add", "-q", "-b", "side", str(linked))
    (linked / "b.txt").write_text("b")
    git.commit_all(linked, "two")
    same(linked)
    same(repo)
    sh(linked, "checkout", "-q", "--detach", "HEAD~1")
    same(linked)
    sh(repo, "symbolic-ref", "refs/heads/alias", "refs/heads/side")
    sh(repo, "symbolic-ref", "HEAD", "refs/heads/alias")
    same(repo)
    (repo / "sub").mkdir()
    same(repo / "sub")


# ---- diffs and cleaning -------------------------------------------------------------------
def test_diff_with_untracked_includes_new_files_and_leaves_the_index(repo: Path) -> None:
    (repo / "README.md").write_text("# changed\n")
    (repo / "brand_new.py").write_text("print('new')\n")
    index_before = sh(repo, "ls-files", "--stage")
    status_before = sh(repo, "status", "--porcelain")
    diff = git.diff_with_untracked(repo)
    assert "+# changed" in diff
    assert "brand_new.py" in diff and "+print('new')" in diff
    numstat = git.diff_with_untracked(repo, stat=True)
    assert "1\t0\tbrand_new.py" in numstat
    assert sh(repo, "ls-files", "--stage") == index_before
    assert sh(repo, "status", "--porcelain") == status_before
    assert "?? brand_new.py" in status_before


def _rewrite_in_the_index_tick(repo: Path) -> None:
    """Rewrite README.md so that only git's racy-clean rule can tell: same size, same inode,
    the mtime git cached, and the index stamped in that same second (ctime not trusted)."""
    sh(repo, "config", "core.trustctime", "false")
    path = repo / "README.md"
    an_hour_ago = time.time_ns() - 3600 * 10**9  # so a copy stamped now is a second later
    os.utime(path, ns=(an_hour_ago, an_hour_ago))
    sh(repo, "add", "README.md")
    path.write_text(path.read_text().upper())
    os.utime(path, ns=(an_hour_ago, an_hour_ago))
    os.utime(repo / ".git" / "index", ns=(an_hour_ago, an_hour_ago))
    assert sh(repo, "diff-files", "--name-only") == "README.md\n"  # git itself sees it


def test_a_rewrite_in_the_index_tick_is_seen_through_the_scratch_index(repo: Path) -> None:
    """The scratch index keeps the real one's mtime. A copy stamped later lost such a change:
    the planner, the diff and the stash then saw the file's content before the rewrite."""
    _rewrite_in_the_index_tick(repo)
    assert "+# SAMPLE" in git.diff_with_untracked(repo)
    assert tree_changes(repo, "HEAD") == [("restore", "README.md")]
    assert git.stash(repo, "tilth: racy", ref=git.stash_ref("racy")) is True
    assert sh(repo, "show", "refs/tilth/stash/racy:README.md") == "# SAMPLE\n"


def test_diff_against_an_older_base(repo: Path) -> None:
    base = git.head(repo)
    (repo / "one.txt").write_text("1\n")
    git.commit_all(repo, "one")
    (repo / "two.txt").write_text("2\n")
    diff = git.diff_with_untracked(repo, base)
    assert "one.txt" in diff and "two.txt" in diff


def test_reset_hard_and_clean_fd_keep_ignored_files(repo: Path) -> None:
    (repo / ".gitignore").write_text("*.log\n")
    git.commit_all(repo, "ignore logs")
    base = git.head(repo)
    (repo / "later.txt").write_text("later")
    git.commit_all(repo, "later")
    (repo / "README.md").write_text("edited\n")
    (repo / "untracked.txt").write_text("u")
    (repo / "newdir").mkdir()
    (repo / "newdir" / "f.txt").write_text("f")
    (repo / "debug.log").write_text("keep")
    git.reset_hard(repo, base)
    assert git.head(repo) == base
    assert (repo / "README.md").read_text() == "# sample\n"
    assert not (repo / "later.txt").exists()
    assert (repo / "untracked.txt").exists()  # reset --hard leaves untracked files
    assert git.is_dirty(repo)
    git.clean_fd(repo)
    assert not (repo / "untracked.txt").exists()
    assert not (repo / "newdir").exists()
    assert (repo / "debug.log").read_text() == "keep"
    assert not git.is_dirty(repo)


def test_reset_soft_keeps_changes_staged(repo: Path) -> None:
    base = git.head(repo)
    (repo / "x.txt").write_text("x")
    git.commit_all(repo, "x")
    git.reset_soft(repo, base)
    assert git.head(repo) == base
    assert sh(repo, "diff", "--cached", "--name-only").strip() == "x.txt"


def test_stash_with_and_without_changes(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = git.stash_ref("20260101-000000-abcdef")
    assert ref == "refs/tilth/stash/20260101-000000-abcdef"
    assert git.stash(repo, "tilth: nothing", ref=ref) is False
    assert sh(repo, "stash", "list") == ""
    (repo / "README.md").write_text("edited\n")
    (repo / "new.txt").write_text("n")
    for name in GIT_IDENTITY_VARS:  # stashing needs an identity too
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("HOME", str(repo.parent))
    assert git.stash(repo, "tilth: before rewind", ref=ref) is True
    assert sh(repo, "stash", "list") == "", "the user's refs/stash is never touched"
    assert git.subject(ref, repo) == "tilth: before rewind"
    assert not git.is_dirty(repo)
    assert not (repo / "new.txt").exists()
    (repo / "new.txt").write_text("second")
    assert git.stash(repo, "tilth: again", ref=ref) is True
    assert git.subject(ref, repo) == "tilth: again"
    assert len(sh(repo, "reflog", ref).splitlines()) == 2, "earlier saves stay in the reflog"
    sh(repo, "cherry-pick", "--no-commit", f"{ref}@{{1}}")
    assert (repo / "README.md").read_text() == "edited\n"
    assert (repo / "new.txt").read_text() == "n"


# ---- errors and timeouts ------------------------------------------------------------------
def test_git_error_carries_cmd_rc_and_stderr(repo: Path) -> None:
    with pytest.raises(GitError) as info:
        git.git("checkout", "no-such-branch", cwd=repo)
    err = info.value
    assert err.cmd == ["git", "checkout", "no-such-branch"]
    assert err.returncode != 0 and err.returncode != -9
    assert "no-such-branch" in err.stderr
    assert "git checkout no-such-branch" in str(err) and f"exit {err.returncode}" in str(err)
    assert git.git("checkout", "no-such-branch", cwd=repo, check=False) == ""
    assert git.ok("checkout", "no-such-branch", cwd=repo) is False


def test_timeout_kills_git_and_its_children(repo: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    alias = f"!sleep 60 & echo $! > {pidfile}; wait"
    with pytest.raises(GitError) as info:
        git.git("-c", f"alias.slow={alias}", "slow", cwd=repo, timeout=2)
    assert info.value.returncode == -9
    assert "timed out" in str(info.value)
    pid = int(pidfile.read_text().strip())
    for _ in range(100):  # the orphaned sleep is reaped shortly after the group is killed
        if not _alive(pid):
            break
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_ensure_worktree_with_a_relative_path(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    made = git_worktrees.ensure_worktree(repo, Path("wt"), "session/rel")
    assert made == (elsewhere / "wt").resolve()
    assert (elsewhere / "wt" / "README.md").is_file()
    assert not (repo / "wt").exists()


def test_the_inert_environment_follows_every_change_of_the_process_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TILTH_TEST_PLAIN", "1")
    monkeypatch.setenv("SOME_TOOL_SETTING", "a")
    first = git.inert_env()
    assert first["SOME_TOOL_SETTING"] == "a" and "TILTH_TEST_PLAIN" not in first
    first["SOME_TOOL_SETTING"] = "changed by a caller"
    assert git.inert_env()["SOME_TOOL_SETTING"] == "a"
    monkeypatch.setenv("SOME_TOOL_SETTING", "b")
    monkeypatch.setenv("ANOTHER_API_KEY", "sk-secret")
    monkeypatch.setenv("GIT_DIR", "/elsewhere")
    second = git.inert_env({"EXTRA": "x"})
    assert second["SOME_TOOL_SETTING"] == "b" and second["EXTRA"] == "x"
    assert "ANOTHER_API_KEY" not in second and "GIT_DIR" not in second
    monkeypatch.delenv("SOME_TOOL_SETTING")
    assert "SOME_TOOL_SETTING" not in git.inert_env()
