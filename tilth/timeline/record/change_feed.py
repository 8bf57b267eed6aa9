"""Finding which files changed in a worktree without reading the whole tree every turn.

Two strategies behind one interface (``changed() -> set of relative paths``):

- ``InotifyWatcher`` (Linux): one watch per non-ignored directory, set up once; each call
  drains the kernel's queue, so its cost follows the number of changes, not the repo size.
- ``StatScanner`` (everywhere, and the fallback when watches run out): a persistent cache
  of ``path → (size, mtime_ns, inode, ctime_ns)``; each call walks the tree and reports
  entries whose stat differs.

Both skip ``.git`` and the directories git ignores (listed once, at start); they report
ignored paths they do notice so capture can record them as coverage gaps.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import struct
import time
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from tilth.timeline.record.git_reads import ignored_dirs

StatKey = tuple[int, int, int, int]
IgnoredDir = Callable[[str], bool]
"""Asks whether a directory (relative path) is ignored by git."""
_IGNORED_DIR: StatKey = (-1, 0, 0, 0)


class Watcher(Protocol):
    """Reports the relative paths that may have changed since the previous call."""

    def changed(self) -> set[str]: ...

    def close(self) -> None: ...


def _walk_dirs(root: Path, skip: set[str]) -> Iterable[str]:
    """Every directory under ``root`` (relative, ``""`` for the root) not in ``skip``."""
    stack = [""]
    while stack:
        rel = stack.pop()
        yield rel
        try:
            with os.scandir(root / rel if rel else root) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        child = f"{rel}/{entry.name}" if rel else entry.name
                        if child not in skip:
                            stack.append(child)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue


RACY_NS = 2 * 10**9
"""A file modified this close to a scan may be rewritten before the clock the filesystem stamps
with has moved on (same size, same times): such files are reported again by the next scan, to
be compared by content (git's "racily clean" rule)."""


class StatScanner:
    """A stat walk against a persistent cache: reports files whose stat changed, and those
    modified too close to the previous scan for their stat to tell."""

    def __init__(self, root: Path, skip: set[str], ignored: IgnoredDir | None = None) -> None:
        self.root = root
        self.skip = skip
        self.ignored = ignored
        self._dirs: set[str] = set()
        started = time.time_ns()
        self.cache: dict[str, StatKey] = self._scan(first=True)
        self._racy = _racy(self.cache, started)

    def _scan(self, first: bool = False) -> dict[str, StatKey]:
        found: dict[str, StatKey] = {}
        dirs: set[str] = set()
        root = self.root
        stack = [""]
        while stack:
            rel = stack.pop()
            try:
                entries = os.scandir(root / rel if rel else root)
            except (FileNotFoundError, NotADirectoryError, PermissionError):
                continue
            with entries:
                for entry in entries:
                    child = f"{rel}/{entry.name}" if rel else entry.name
                    if entry.is_dir(follow_symlinks=False):
                        if child in self.skip:
                            if child in self._dirs:
                                found[child] = _IGNORED_DIR  # reported once, when it appeared
                            continue
                        if (
                            not first
                            and child not in self._dirs
                            and self.ignored is not None
                            and self.ignored(child)
                        ):
                            # A directory git ignores appeared (a virtualenv, a build dir):
                            # report it once, never walk it.
                            self.skip.add(child)
                            found[child] = _IGNORED_DIR
                            dirs.add(child)
                            continue
                        dirs.add(child)
                        stack.append(child)
                        continue
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    found[child] = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
        self._dirs = dirs
        return found

    def changed(self) -> set[str]:
        """Paths created, deleted or modified since the previous call (or that may have been)."""
        started = time.time_ns()
        now = self._scan()
        old = self.cache
        self.cache = now
        diff = {p for p, key in now.items() if old.get(p) != key}
        diff.update(p for p in old if p not in now)
        diff |= self._racy
        self._racy = _racy(now, started)
        return diff

    def close(self) -> None:
        self.cache = {}


def _racy(found: dict[str, StatKey], scan_started: int) -> set[str]:
    return {
        p for p, key in found.items() if key != _IGNORED_DIR and key[1] >= scan_started - RACY_NS
    }


# ---- inotify via ctypes ----------------------------------------------------------------
_IN_MODIFY = 0x002
_IN_ATTRIB = 0x004
_IN_CLOSE_WRITE = 0x008
_IN_MOVED_FROM = 0x040
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_Q_OVERFLOW = 0x4000
_IN_IGNORED = 0x8000
_IN_ISDIR = 0x40000000
_IN_ONLYDIR = 0x01000000
_IN_DONT_FOLLOW = 0x02000000
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_MASK = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
    | _IN_ONLYDIR
    | _IN_DONT_FOLLOW
)
_HEADER = struct.Struct("iIII")


class WatchUnavailable(OSError):
    """inotify cannot be used here (not Linux, or out of watches/instances)."""


@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library this process already runs on; looked up by name (``ldconfig -p``, a
    process) only where the running program does not export inotify."""
    lib = ctypes.CDLL(None, use_errno=True)
    if hasattr(lib, "inotify_init1"):
        return lib
    name = ctypes.util.find_library("c")
    if not name or not hasattr(os, "read"):
        raise WatchUnavailable("no C library")
    lib = ctypes.CDLL(name, use_errno=True)
    if not hasattr(lib, "inotify_init1"):
        raise WatchUnavailable("no inotify on this system")
    return lib


class InotifyWatcher:
    """Persistent inotify watches on every non-ignored directory of ``root``."""

    def __init__(self, root: Path, skip: set[str], ignored: IgnoredDir | None = None) -> None:
        self.root = root
        self.skip = skip
        self.ignored = ignored
        self._lib = _libc()
        fd = self._lib.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            raise WatchUnavailable(os.strerror(ctypes.get_errno()))
        self.fd = fd
        # Closed with the watcher even when nobody calls close(): a session may create many
        # recorders, and the kernel allows a user few inotify instances.
        self._finalizer = weakref.finalize(self, os.close, fd)
        self._dirs: dict[int, str] = {}
        self.overflowed = False
        try:
            for rel in _walk_dirs(root, skip):
                self._add(rel)
        except WatchUnavailable:
            self.close()
            raise

    def _add(self, rel: str) -> None:
        path = os.fsencode(self.root / rel if rel else self.root)
        wd = self._lib.inotify_add_watch(self.fd, ctypes.c_char_p(path), _MASK)
        if wd < 0:
            err = ctypes.get_errno()
            if err in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                return
            raise WatchUnavailable(f"inotify_add_watch failed: {os.strerror(err)}")
        self._dirs[wd] = rel

    def _read(self) -> bytes:
        chunks = []
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def changed(self) -> set[str]:
        """Paths with events since the previous call; new directories are watched and listed.

        Raises ``WatchUnavailable`` when the kernel queue overflowed (events were lost)
        or watches ran out, so the caller falls back to a full scan.
        """
        found: set[str] = set()
        new_dirs: list[str] = []
        data = self._read()
        pos = 0
        while pos + _HEADER.size <= len(data):
            wd, mask, _cookie, length = _HEADER.unpack_from(data, pos)
            raw_name = data[pos + _HEADER.size : pos + _HEADER.size + length].rstrip(b"\0")
            pos += _HEADER.size + length
            if mask & _IN_Q_OVERFLOW:
                self.overflowed = True
                raise WatchUnavailable("inotify queue overflowed")
            base = self._dirs.get(wd)
            if mask & _IN_IGNORED:
                self._dirs.pop(wd, None)
                continue
            if mask & _IN_MOVE_SELF:
                # A moved directory keeps its watch under the old name; drop it (the
                # destination is watched afresh when its MOVED_TO arrives).
                if base is not None:
                    found.add(base)
                self._lib.inotify_rm_watch(self.fd, wd)
                self._dirs.pop(wd, None)
                continue
            if base is None or not raw_name:
                continue
            name = os.fsdecode(raw_name)
            rel = f"{base}/{name}" if base else name
            found.add(rel)
            if mask & _IN_ISDIR and mask & (_IN_CREATE | _IN_MOVED_TO) and rel not in self.skip:
                if self.ignored is not None and self.ignored(rel):
                    self.skip.add(rel)  # a new ignored directory: reported, never watched
                else:
                    new_dirs.append(rel)
        for rel in new_dirs:
            # Files created in a new directory before its watch existed raise no event:
            # watch and list the directory (and its subdirectories) once now.
            for sub in _walk_dirs_under(self.root, rel, self.skip):
                self._add(sub)
                found.update(_list_files(self.root, sub))
        return found

    def close(self) -> None:
        if self.fd >= 0:
            self._finalizer()
            self.fd = -1


def _walk_dirs_under(root: Path, start: str, skip: set[str]) -> Iterable[str]:
    stack = [start]
    while stack:
        rel = stack.pop()
        yield rel
        try:
            with os.scandir(root / rel) as entries:
                for entry in entries:
                    child = f"{rel}/{entry.name}"
                    if entry.is_dir(follow_symlinks=False) and child not in skip:
                        stack.append(child)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue


def _list_files(root: Path, rel: str) -> set[str]:
    try:
        with os.scandir(root / rel) as entries:
            return {f"{rel}/{e.name}" for e in entries if not e.is_dir(follow_symlinks=False)}
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return set()


def start_watcher(
    root: Path, skip: set[str] | None = None, ignored: IgnoredDir | None = None
) -> Watcher:
    """The fastest watcher available for ``root``: inotify, else a stat scanner."""
    skip = ignored_dirs(root) if skip is None else skip
    if os.environ.get("TILTH_CAPTURE_WATCH", "").strip().lower() != "scan":
        try:
            return InotifyWatcher(root, skip, ignored)
        except (WatchUnavailable, OSError, AttributeError):
            pass
    return StatScanner(root, skip, ignored)
