"""The one way Tilth's own process reads a file from a directory a model can write.

A worktree, a chat's directory or the gate's scratch directory hold whatever the
model (or code it wrote) put there: ``AGENTS.md -> /proc/self/environ``, a hard link
to Tilth's state, a FIFO that blocks the reader for ever. ``read_inside`` walks the
path one component at a time from an open handle on the root (``openat`` with
``O_NOFOLLOW``), so nothing can be swapped in between a check and the read:

- a symbolic link is followed only while it stays inside the root (an absolute
  target, or ``..`` past the root, is refused);
- the file opened must be a regular file with one link (a device, a FIFO, a
  socket or a hard link to a file elsewhere is refused); it is opened
  non-blocking, so a FIFO swapped in cannot stall the open;
- at most ``limit`` bytes are read.

Every such read in the package goes through here; ``tests/security/test_safe_reads.py``
lists the raw reads that remain and why each is not of a model-writable file.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath

MAX_LINK_HOPS = 40


class UnsafeFile(OSError):
    """A file that ``read_inside`` refuses to read (what it is, in the message)."""


def read_inside(root: Path, relative: str | PurePosixPath, limit: int) -> bytes:
    """At most ``limit`` bytes of ``root/relative``, never leaving ``root``.

    Raises ``FileNotFoundError`` when there is no such file and ``UnsafeFile`` when
    the path leaves ``root`` or names something other than a plain file.
    """
    if str(os.path.realpath(root)).startswith("/proc"):
        raise UnsafeFile(errno.EACCES, "a directory under /proc is never read", str(root))
    fd = _open_inside(root, str(relative))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(errno.EACCES, "not a regular file", str(relative))
        if info.st_nlink > 1:
            raise UnsafeFile(errno.EACCES, "a hard link (maybe to a file elsewhere)", str(relative))
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text_inside(root: Path, relative: str | PurePosixPath, limit: int) -> str:
    """``read_inside`` decoded as UTF-8 (undecodable bytes replaced)."""
    return read_inside(root, relative, limit).decode("utf-8", errors="replace")


def try_read_text(root: Path, relative: str | PurePosixPath, limit: int) -> str | None:
    """``read_text_inside``, or None when the file is missing, refused or unreadable."""
    try:
        return read_text_inside(root, relative, limit)
    except OSError:
        return None


def _open_inside(root: Path, relative: str) -> int:
    """A read-only descriptor of the file ``relative`` names under ``root``."""
    if relative.startswith("/"):
        raise UnsafeFile(errno.EACCES, "an absolute path", relative)
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    stack = [os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]
    pending = [p for p in relative.split("/") if p not in ("", ".")]
    hops = 0
    try:
        while pending:
            name = pending.pop(0)
            if name == "..":
                if len(stack) == 1:
                    raise UnsafeFile(errno.EACCES, "a path that leaves its directory", relative)
                os.close(stack.pop())
                continue
            here = stack[-1]
            info = os.stat(name, dir_fd=here, follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                target = os.readlink(name, dir_fd=here)
                hops += 1
                if target.startswith("/") or hops > MAX_LINK_HOPS:
                    raise UnsafeFile(
                        errno.EACCES, "a symbolic link that leaves its directory", relative
                    )
                pending = [p for p in target.split("/") if p not in ("", ".")] + pending
                continue
            if pending:
                stack.append(os.open(name, flags | os.O_DIRECTORY, dir_fd=here))
                continue
            try:
                return os.open(name, flags, dir_fd=here)
            except OSError as exc:
                if exc.errno == errno.ELOOP:  # became a link after the check
                    raise UnsafeFile(errno.EACCES, "changed while read", relative) from None
                raise
        raise UnsafeFile(errno.EISDIR, "a directory", relative)
    finally:
        for fd in stack:
            os.close(fd)
