"""The lock files a killed git leaves behind, and only those.

git takes a lock by creating ``<file>.lock`` exclusively and holds it open while it writes
(``index.lock`` above all); a git killed on its timeout never removes it, and every later
git command there fails ("Another git process seems to be running"). Just before Tilth
kills a git call's process group it notes the ``.lock`` files that group holds open, by
path and inode; after the kill, a lock still at that path with that inode is the very file
the dead git created, and is removed. A lock another git holds (a different process, or a
new file at the same path) is never touched, nor one Tilth's git did not hold open.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tilth import proc


@dataclass(frozen=True)
class HeldLock:
    """A lock file a process had open: where, and which file it was."""

    path: str
    device: int
    inode: int


def held_locks(group: int) -> list[HeldLock]:
    """The ``.lock`` files the processes of ``group`` have open right now."""
    held: list[HeldLock] = []
    for pid in proc.processes_with(proc.GROUP, group):
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
                if not target.endswith(".lock") or not target.startswith("/"):
                    continue  # (a deleted file reads "<path> (deleted)")
                info = os.stat(f"{fd_dir}/{fd}")
            except OSError:
                continue
            held.append(HeldLock(target, info.st_dev, info.st_ino))
    return held


def remove_left(held: list[HeldLock]) -> list[Path]:
    """Remove each of ``held`` still there as the same file (its git is dead); the removed."""
    removed: list[Path] = []
    for lock in held:
        try:
            info = os.lstat(lock.path)
            if (info.st_dev, info.st_ino) != (lock.device, lock.inode):
                continue  # another git's lock now
            os.unlink(lock.path)
        except OSError:
            continue
        removed.append(Path(lock.path))
    return removed
