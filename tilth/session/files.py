"""Crash-safe file primitives: atomic replace and fsynced appends."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path
from typing import Any, BinaryIO

from tilth.errors import SessionCorrupt, StorageError
from tilth.secret_filter import scrub


def fsync_dir(directory: Path) -> None:
    """Flush a directory entry so a rename or create survives a power cut."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, *, flush_dir: bool = True) -> None:
    """Write ``data`` to ``path`` via temp file + fsync + rename + directory fsync (unless
    ``flush_dir`` is False: a later write in the same directory flushes the rename).

    A full disk or a missing permission is a ``StorageError`` naming ``path``; the
    old content is then left as it was.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise StorageError.wrap("write", path, exc) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise StorageError.wrap("write", path, exc) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if flush_dir:
        fsync_dir(path.parent)


def state_bytes(text: str) -> bytes:
    """``text`` as UTF-8, a lone surrogate written as its JSON escape (``\\udcff``).

    A file name that is not UTF-8 reaches Python as a string with lone surrogates
    (``os.fsdecode``); inside a JSON string the escape reads back as the same character,
    so the name round-trips byte for byte through every state file.
    """
    return text.encode("utf-8", "backslashreplace")


def atomic_write_text(path: Path, text: str, *, flush_dir: bool = True) -> None:
    """Atomically replace ``path`` with ``text`` (UTF-8), API keys filtered out."""
    atomic_write_bytes(path, state_bytes(scrub(text)), flush_dir=flush_dir)


def dumps(value: Any) -> str:
    """The one JSON style for state files: indented, sorted keys off, trailing newline."""
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def atomic_write_json(path: Path, value: Any, *, flush_dir: bool = True) -> None:
    """Atomically replace ``path`` with ``value`` as JSON."""
    atomic_write_text(path, dumps(value), flush_dir=flush_dir)


def read_json(path: Path, *, what: str) -> Any:
    """Parse ``path``; a missing file raises FileNotFoundError, garbage raises SessionCorrupt."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SessionCorrupt(f"{what} at {path} is not UTF-8 text: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SessionCorrupt(
            f"{what} at {path} is not valid JSON (line {exc.lineno}: {exc.msg})",
            hint="`tilth doctor <id>` says whether it can be restored from a checkpoint",
        ) from None
    except RecursionError:
        raise SessionCorrupt(
            f"{what} at {path} is nested too deeply to be a state file",
            hint="`tilth doctor <id>` says whether it can be restored from a checkpoint",
        ) from None


def read_at(path: Path, offset: int, count: int | None = None) -> tuple[bytes, int]:
    """``count`` bytes of ``path`` from ``offset`` (all of the rest when None) and its size.

    Plain system calls, no file object: readers that come back at every change (each
    follower of a served session reads the log and its epoch record) would spend more on
    making and closing a Python file object than on the read itself.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        wanted = size - offset if count is None else count
        if wanted <= 0 or offset >= size:
            return b"", size
        chunks = []
        while wanted > 0:
            chunk = os.pread(fd, wanted, offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
            wanted -= len(chunk)
        return b"".join(chunks), size
    finally:
        os.close(fd)


def append_line(path: Path, line: str, *, repair: bool = False) -> int:
    """Append one line (newline added), flush and fsync; returns the file size after.

    With ``repair``, a torn last line (no newline: a crash mid-append) is cut
    first, so the new line is not glued onto it.
    """
    data = state_bytes(scrub(line) + "\n")
    try:
        # Unbuffered: a failed write leaves nothing pending for close() to retry.
        handle = open(path, "a+b", buffering=0)
    except OSError as exc:
        raise StorageError.wrap("write", path, exc) from None
    with handle:
        size = 0
        try:
            if repair:
                _cut_torn_tail(handle)
            size = handle.seek(0, os.SEEK_END)
            rest = memoryview(data)
            while rest:
                written = handle.write(rest)
                if not written:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                rest = rest[written:]
            os.fsync(handle.fileno())
            return size + len(data)
        except OSError as exc:
            _undo_append(handle, size)
            raise StorageError.wrap("write", path, exc) from None


def _undo_append(handle: BinaryIO, size: int) -> None:
    """Cut what a failed append left (a line is written whole or not at all)."""
    try:
        os.ftruncate(handle.fileno(), size)
        os.fsync(handle.fileno())
    except OSError:
        pass  # the next append's torn-tail repair cuts it instead


def _cut_torn_tail(handle: BinaryIO) -> None:
    size = handle.seek(0, os.SEEK_END)
    if size == 0:
        return
    handle.seek(size - 1)
    if handle.read(1) == b"\n":
        return
    window = min(size, 1 << 20)
    handle.seek(size - window)
    cut = handle.read(window).rfind(b"\n")
    handle.truncate(size - window + cut + 1 if cut >= 0 else 0)
