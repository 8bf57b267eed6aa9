"""The session's git worktrees and branches in the source repository."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from tilth.errors import GitError
from tilth.git.refs import git_dirs, is_sha, small_text
from tilth.git.repo import git, ok


def worktrees(source: Path) -> dict[Path, str | None]:
    """Registered worktrees of ``source``: path → branch (None when detached)."""
    out = git("worktree", "list", "--porcelain", cwd=source)
    result: dict[Path, str | None] = {}
    current: Path | None = None
    for line in out.splitlines():
        if line.startswith("worktree "):
            current = Path(line[len("worktree ") :]).resolve()
            result[current] = None
        elif line.startswith("branch ") and current is not None:
            result[current] = line[len("branch ") :].removeprefix("refs/heads/")
    return result


def branch_exists(source: Path, branch: str) -> bool:
    """True when ``refs/heads/<branch>`` exists in ``source``: seen in its loose ref file
    (no process; every run and attempt starts by asking), else asked of git (packed refs,
    reftable)."""
    dirs = git_dirs(source)
    if dirs is not None and ".." not in branch and not branch.startswith("/"):
        if is_sha((small_text(dirs[1] / "refs" / "heads" / branch) or "").strip()):
            return True
    return ok("show-ref", "--verify", "--quiet", f"refs/heads/{branch}", cwd=source)


def ensure_worktree(source: Path, path: Path, branch: str, start: str = "HEAD") -> Path:
    """The worktree at ``path`` on ``branch``, creating (or re-creating) it as needed."""
    path = path.absolute()  # git runs in ``source``: a relative path would land there
    if not path.exists() and add_new(source, path, branch, start):
        return path.resolve()
    resolved = path.resolve()
    if path.is_dir() and (_registered(source, resolved) or resolved in worktrees(source)):
        await_checkout(resolved)
        return resolved
    prune(source)
    path.parent.mkdir(parents=True, exist_ok=True)
    if branch_exists(source, branch):
        git(*PARALLEL_CHECKOUT, "worktree", "add", "-q", str(path), branch, cwd=source)
    else:
        git(*PARALLEL_CHECKOUT, "worktree", "add", "-q", "-b", branch, str(path), start, cwd=source)
    return path.resolve()


def _registered(source: Path, path: Path) -> bool:
    """True when git's own files say ``path`` is a worktree of ``source`` (no process): its
    ``.git`` points into ``source``'s ``worktrees/`` and that entry points back at it. False
    when they do not say so plainly (then ``git worktree list`` is asked)."""
    dirs, home = git_dirs(path), git_dirs(source)
    if dirs is None or home is None or dirs[1] != home[1].resolve():
        return False
    if dirs[0].resolve().parent != home[1].resolve() / "worktrees":
        return False
    back = (small_text(dirs[0] / "gitdir") or "").strip()
    return bool(back) and Path(back).resolve() == (path / ".git").resolve()


def add_new(
    source: Path,
    path: Path,
    branch: str,
    start: str,
    started: Callable[[int], object] | None = None,
) -> bool:
    """The common case straight away (a new session, a fork): a new branch in a new
    worktree, one git call instead of four (each costs a process; an attempt's fork pays
    them before its worker can start). False when git refuses (the branch exists, a stale
    entry holds the path): then the careful way looks, prunes and adds. ``started`` hears
    the git's pid (its process group) as it starts."""
    try:
        git(
            *PARALLEL_CHECKOUT,
            *("worktree", "add", "-q", "-b", branch, str(path), start),
            cwd=source,
            started=started,
        )
    except GitError:
        return False
    return True


CHECKOUT_SECONDS = 60.0
"""How long ``await_checkout`` waits for another git to finish writing a worktree."""


def await_checkout(path: Path, seconds: float = CHECKOUT_SECONDS) -> None:
    """Wait while a ``git worktree add`` that another process started is still writing the
    worktree at ``path``: git keeps a ``locked`` file saying ``initializing`` in the
    worktree's admin directory until its checkout is done. A fork checks out its worktree
    beside its records (``rewind.fork_steps``); killed meanwhile, it leaves that git
    finishing on its own, and the command completing the fork must not take the
    half-written tree. A lock that stays (that git died too) is waited for ``seconds``."""
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        if not (path / ".git").exists():
            if time.monotonic() - began > 1.0:
                return  # not the moment before git writes it: a broken worktree, as it is
        else:
            dirs = git_dirs(path)
            if dirs is None or (small_text(dirs[0] / "locked") or "").strip() != "initializing":
                return
        time.sleep(0.02)


PARALLEL_CHECKOUT = ("-c", "checkout.workers=0")
"""Write a new worktree's files with one worker per core (git's own parallel checkout):
on a large repository (an attempt's fork of 100k files) that is most of its making."""


def init_submodules(worktree: Path, timeout: float = 600.0) -> str | None:
    """Check out the worktree's submodules; a sentence saying what failed, or None.

    A fresh worktree has empty submodule directories; code that needs them would fail
    in ways the worker cannot explain.
    """
    if not (worktree / ".gitmodules").is_file():
        return None
    try:
        git("submodule", "update", "--init", "--recursive", cwd=worktree, timeout=timeout)
    except GitError as exc:
        why = exc.stderr.splitlines()[-1] if exc.stderr else str(exc)
        return (
            f"could not check out the submodules in {worktree} ({why}); their directories "
            f"are empty — run `git -C {worktree} submodule update --init`"
        )
    return None


def remove_worktree(source: Path, path: Path) -> None:
    """Remove the worktree at ``path`` (forcefully) and prune stale entries.

    A directory at ``path`` that is not registered as a worktree of ``source`` is
    left alone: git refuses to remove it, and it is not ours to delete.
    """
    if path.exists() and path.resolve() in worktrees(source):
        git("worktree", "remove", "--force", "--force", str(path), cwd=source)
    prune(source)


def prune(source: Path) -> None:
    """Forget worktrees of ``source`` whose directories are gone (``git worktree prune``)."""
    git("worktree", "prune", cwd=source)


def delete_branch(source: Path, branch: str) -> bool:
    """Delete ``branch``; False when it did not exist."""
    if not branch_exists(source, branch):
        return False
    git("branch", "-q", "-D", branch, cwd=source)
    return True
