"""One digest of a working tree, for tests that compare states before and after a go-back.

``tree_hash`` covers what a commit of the tree would hold: tracked files as they are on
disk and untracked ones that are not ignored, each with its kind (file, executable, link,
nested repository) and content. It asks git one question (which paths count) and reads
the files itself; the digest is not a git tree id, only equal for equal trees.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from tilth import git
from tilth.git.refs import head_from_files


def tree_hash(worktree: Path) -> str:
    """A digest of ``worktree``'s files that git would commit (ignored files left out)."""
    listed = git.git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=worktree)
    digest = hashlib.sha256()
    for rel in sorted({p.rstrip("/") for p in listed.split("\0") if p}):
        entry = _entry(worktree / rel)
        if entry is not None:
            digest.update(f"{rel}\0{entry}\n".encode())
    return digest.hexdigest()


def _entry(path: Path) -> str | None:
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return None  # tracked but deleted: a commit of the tree would drop it
    if stat.S_ISLNK(found.st_mode):
        return "link " + os.readlink(path)
    if stat.S_ISDIR(found.st_mode):  # a nested repository: its commit stands for it
        return f"repo {head_from_files(path)}"
    kind = "exec" if found.st_mode & stat.S_IXUSR else "file"
    if found.st_size > git.LARGEST_FILE:  # told apart by size alone (never staged)
        return f"{kind} size {found.st_size}"
    return f"{kind} {hashlib.sha256(path.read_bytes()).hexdigest()}"
