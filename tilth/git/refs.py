"""A repository's HEAD read from its files, without starting git.

Tilth asks for HEAD thousands of times a run; reading the ref files costs no process. The
files may be a worker's (a repository it made in the worktree), so each is read only when
small and regular: never a FIFO to wait on, never a huge sparse file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def git_dirs(worktree: Path) -> tuple[Path, Path] | None:
    """``(git dir, common dir)`` of the repository whose top level is ``worktree``, read
    from its ``.git`` (a directory, or a linked worktree's "gitdir: <path>" file)."""
    dotgit = worktree / ".git"
    gitdir = dotgit
    if dotgit.is_file():  # a linked worktree: "gitdir: <path>"
        pointer = (small_text(dotgit) or "").removesuffix("\n")
        target = pointer.removeprefix("gitdir: ")
        if target == pointer or not target or target != target.strip():
            return None  # not the one form git writes: let git read it its own way
        gitdir = Path(target)
        if not gitdir.is_absolute():
            gitdir = (worktree / gitdir).resolve()
    if not (gitdir / "commondir").is_file() and not (gitdir / "objects").is_dir():
        return None  # not a repository git would use: it would look further up
    common = gitdir
    if (gitdir / "commondir").is_file():
        common = (gitdir / (small_text(gitdir / "commondir") or ".").strip()).resolve()
    return gitdir, common


def branch_from_files(worktree: Path) -> tuple[bool, str | None]:
    """``(known, branch)``: the branch HEAD is on (None: detached), read from the files.
    ``known`` is False when the files do not say (then ask git)."""
    dirs = git_dirs(worktree)
    if dirs is None or (dirs[0] / "HEAD").is_symlink():  # a symlinked HEAD: git follows it
        return False, None
    value = (small_text(dirs[0] / "HEAD") or "").strip()
    if is_sha(value):
        return True, None
    branch = value.removeprefix("ref: refs/heads/")
    if branch == value or not _plain_ref_name(branch):  # .invalid: a reftable repository
        return False, None
    if (small_text(dirs[1] / "refs" / "heads" / branch) or "").startswith("ref:"):
        return False, None  # a symbolic branch: git names the branch at the end of the chain
    return True, branch


def _plain_ref_name(name: str) -> bool:
    """A branch name any git accepts, read as it is (else git is asked, and may refuse)."""
    if (
        ".." in name
        or "@{" in name
        or any(c in name for c in " ~^:?*[\\")
        or not name.isprintable()
    ):
        return False
    return all(p and not p.startswith(".") and not p.endswith(".lock") for p in name.split("/"))


def head_from_files(worktree: Path) -> str | None:
    """HEAD's sha from the ref files, or None (then ask git). The files may be a worker's (a
    repository it made in the worktree): each is read only if small and regular."""
    dirs = git_dirs(worktree)
    if dirs is None:
        return None
    gitdir, common = dirs
    value = (small_text(gitdir / "HEAD") or "").strip()
    if not value.startswith("ref: "):
        return value if is_sha(value) else None
    ref = value[5:]
    for base in (gitdir, common):
        loose = base / ref
        if loose.is_file():
            sha = (small_text(loose) or "").strip()
            return sha if is_sha(sha) else None
    for line in (small_text(common / "packed-refs", 64 << 20) or "").splitlines():
        if line.endswith(" " + ref) and is_sha(line.split(" ", 1)[0]):
            return line.split(" ", 1)[0]
    return None


def small_text(path: Path, limit: int = 1 << 16) -> str | None:
    """A regular file's text when it is at most ``limit`` bytes, else None; never waits on a
    FIFO and never reads a huge (sparse) file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode) or found.st_size > limit:
            return None
        return handle.read(limit).decode("utf-8", "replace")


def is_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)
