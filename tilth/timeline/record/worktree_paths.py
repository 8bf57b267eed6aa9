"""Paths of a worktree as capture and restore see them: a link is an entry, never a way in.

A link to a directory is recorded like a link to a file, as its target text. What lies
behind it is either recorded at its own path inside the worktree or is not the worktree's
at all, so nothing here follows a link below the root: a path whose parent is a link (or a
file) names nothing in the worktree, a directory is walked without entering the links in
it, and a path announced through a link is taken at the path the link leads to.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Collection, Sequence
from pathlib import Path


def relative_path(root: Path, path: Path) -> str | None:
    """``path`` (absolute, or relative to the resolved ``root``) as a worktree path: its
    parent resolved, its last part kept (a link is named, not followed); None outside."""
    path = Path(path)
    if not path.is_absolute():
        path = root / path
    try:
        where = path.resolve() if path.name == ".." else path.parent.resolve() / path.name
        rel = where.relative_to(root).as_posix()
    except (ValueError, OSError, RuntimeError):
        return None
    return None if rel in ("", ".") else rel


def link_parent(root: Path, rel: str) -> str | None:
    """The first parent of ``rel`` below ``root`` that is a link or a file where a directory
    would be; None when every parent is a directory or missing."""
    parts = rel.split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        parent = "/".join(parts[:depth])
        try:
            mode = os.lstat(root / parent).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not stat.S_ISDIR(mode):
            return parent
    return None


def entry_kind(root: Path, rel: str) -> str | None:
    """``dir``, ``link`` or ``file`` (anything else) at ``rel``, reached without following a
    link; None when nothing is there, or when a parent is not a directory."""
    if link_parent(root, rel) is not None:
        return None
    try:
        mode = os.lstat(root / rel).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISDIR(mode):
        return "dir"
    return "link" if stat.S_ISLNK(mode) else "file"


def files_below(root: Path, rel: str, skip_dir: Callable[[str], bool]) -> set[str]:
    """Every file and link under the directory ``rel`` (links to directories too, never
    entered), leaving out the directories ``skip_dir`` names."""
    found: set[str] = set()
    for current, dirs, names in os.walk(root / rel, followlinks=False):
        base = Path(current).relative_to(root).as_posix()
        dirs[:] = [d for d in dirs if not skip_dir(f"{base}/{d}")]
        found.update(f"{base}/{n}" for n in names)
        found.update(f"{base}/{d}" for d in dirs if (Path(current) / d).is_symlink())
    return found


def expand_dirs(
    root: Path,
    candidates: set[str],
    known: Sequence[Collection[str]],
    skip_dir: Callable[[str], bool],
) -> set[str]:
    """``candidates`` with each directory among them standing for what is below it.

    A directory stands for the files and links found under it and the ``known`` paths
    below it (so moved and deleted files are seen), and for itself where it is known as a
    file or link; one ``skip_dir`` names stands for nothing more. A candidate that is not
    known and is no directory any more (gone, a link now, or under a link) stands for the
    known paths below it: they left the worktree.
    """
    out: set[str] = set()
    prefixes: list[str] = []
    for rel in candidates:
        kind = entry_kind(root, rel)
        is_known = any(rel in paths for paths in known)
        if kind == "dir":
            if is_known:
                out.add(rel)  # a known file or link is a directory now: it is gone
            if not skip_dir(rel):
                prefixes.append(rel + "/")
                out |= files_below(root, rel, skip_dir)
            continue
        out.add(rel)
        if kind in (None, "link") and not is_known:
            prefixes.append(rel + "/")
    if prefixes:
        below = tuple(prefixes)
        out.update(p for paths in known for p in paths if p.startswith(below))
    return out
