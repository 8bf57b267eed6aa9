"""Thread files parsed once: a later read parses only the lines appended since.

A thread is read several times a turn (the request, the context check, the next message
id), and each read used to parse and check every line of the file: a chat's turn grew
with its length (at 300 turns, half a second of JSON parsing a turn). This keeps, per
file, the records accepted up to its last complete line and a CRC-32 of those bytes. They
are trusted only while the file is the same file (device and inode) and still starts with
exactly those bytes, checked at every read (~1 ms a megabyte, against ~20 ms to parse
it); anything else (a rewrite, a cut, an edit by hand) reads it again from its start.
``forget`` drops a file this process rewrites. At most ``KEPT`` files and ``KEPT_BYTES``
of them are kept, the ones read last (a worker drives many sessions a night).
"""

from __future__ import annotations

import json
import os
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KEPT = 32
"""How many thread files stay parsed (the threads a few live sessions use at once)."""
KEPT_BYTES = 32 * 1024 * 1024
"""How many bytes of thread files stay parsed (the objects take a few times more)."""


@dataclass(frozen=True)
class _Parsed:
    ident: tuple[int, int]
    end: int
    """The offset just past the last complete line parsed."""
    crc: int
    """``zlib.crc32`` of the file's first ``end`` bytes."""
    records: tuple[dict[str, Any], ...]


_kept: OrderedDict[Path, _Parsed] = OrderedDict()
_lock = threading.Lock()


def read_records(path: Path, problem: Callable[[Any], str | None]) -> list[dict[str, Any]]:
    """The records of the ``.jsonl`` file ``path`` that ``problem`` accepts, in order (a torn
    last line, blank lines and lines it refuses are skipped). Treat them as read-only: they
    are shared with later reads."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        forget(path)
        return []
    try:
        st = os.fstat(fd)
        ident = (st.st_dev, st.st_ino)
        data = _read_all(fd, st.st_size)
    finally:
        os.close(fd)
    with _lock:
        parsed = _kept.get(path)
    if parsed is None or not _starts(data, parsed, ident):
        parsed = _Parsed(ident, 0, 0, ())
    cut = data.rfind(b"\n") + 1
    if cut > parsed.end:
        parsed = _more(parsed, data[parsed.end : cut], problem)
    with _lock:
        _kept[path] = parsed
        _kept.move_to_end(path)
        while len(_kept) > KEPT or (
            len(_kept) > 1 and sum(p.end for p in _kept.values()) > KEPT_BYTES
        ):
            _kept.popitem(last=False)
    return list(parsed.records)


def forget(path: Path) -> None:
    """Drop what is kept of ``path`` (this process is about to replace it)."""
    with _lock:
        _kept.pop(path, None)


def _starts(data: bytes, parsed: _Parsed, ident: tuple[int, int]) -> bool:
    """True when ``data`` (the file ``ident`` now) begins with the bytes ``parsed`` read."""
    if parsed.ident != ident or len(data) < parsed.end:
        return False
    return zlib.crc32(memoryview(data)[: parsed.end]) == parsed.crc


def _read_all(fd: int, size: int) -> bytes:
    chunks = []
    offset = 0
    while True:  # to the end, even past ``size`` when it grew meanwhile
        chunk = os.pread(fd, max(size - offset, 1 << 16), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _more(parsed: _Parsed, block: bytes, problem: Callable[[Any], str | None]) -> _Parsed:
    """``parsed`` with the complete lines of ``block`` (read at ``parsed.end``) added."""
    lines = block.split(b"\n")[:-1]
    records = list(parsed.records)
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            continue
        if problem(record) is None:
            records.append(record)
    crc = zlib.crc32(block, parsed.crc)
    return _Parsed(parsed.ident, parsed.end + len(block), crc, tuple(records))
