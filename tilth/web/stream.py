"""Server-Sent Events that follow a session's ``events.jsonl`` as it grows.

One ``LogWatch`` per session stats the log every ``POLL_SECONDS`` while anyone
listens and wakes its listeners when it changes; each listener reads the new
complete lines from its own byte offset, so no event is sent twice or skipped.
Every event goes out as ``id: <seq>`` plus the stored JSON line. A log that was
cut (a rewind, a restart, a reset to the seed) is noticed — it shrank, or the
next line's ``seq`` does not follow the last one sent — and the listener gets an
``event: reset`` and then the log again from its start. A reconnect with
``Last-Event-ID: <seq>`` resumes after that event.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from anyio import to_thread

POLL_SECONDS = 0.05
HEARTBEAT_SECONDS = 15.0
INLINE_READ_BYTES = 256 * 1024
"""Reads up to this size happen on the event loop; bigger backlogs go to a thread."""


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass
class LogWatch:
    """Wakes every listener of one log when the file changes.

    Each change sets the current ``asyncio.Event`` and puts a fresh one in its place. An
    event, unlike a condition, holds no lock: a follower cancelled while it waits (its
    client went away) cannot leave anything locked behind for the others.
    """

    path: Path
    version: int = 0
    listeners: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    async def _poll(self, last: tuple[int, int, int] | None) -> None:
        while self.listeners > 0:
            await asyncio.sleep(POLL_SECONDS)
            now = _signature(self.path)
            if now != last:
                last = now
                await self.bump()

    async def bump(self) -> None:
        """Wake everyone (also called directly after this server cut the log itself)."""
        self.version += 1
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()

    def join(self) -> None:
        self.listeners += 1
        if self.task is None or self.task.done():
            # The signature is taken now, before the joining follower reads the log: a change
            # made after that read but before the task first runs must still count as one.
            start = _signature(self.path)
            self.task = asyncio.get_running_loop().create_task(self._poll(start))

    def leave(self) -> None:
        self.listeners -= 1

    async def wait(self, seen: int, timeout: float) -> int:
        """Wait until the version passes ``seen`` (or ``timeout``); returns the version."""
        if self.version == seen:
            # No await between the check and taking the event: a bump in between is seen.
            try:
                await asyncio.wait_for(self.changed.wait(), timeout)
            except TimeoutError:
                pass
        return self.version


class Watches:
    """The ``LogWatch`` of every session somebody follows."""

    def __init__(self) -> None:
        self._watches: dict[Path, LogWatch] = {}
        self.closing = asyncio.Event()

    def get(self, path: Path) -> LogWatch:
        watch = self._watches.get(path)
        if watch is None:
            watch = self._watches[path] = LogWatch(path)
        return watch

    async def bump(self, path: Path) -> None:
        watch = self._watches.get(path)
        if watch is not None:
            await watch.bump()

    async def close(self) -> None:
        self.closing.set()
        for watch in self._watches.values():
            await watch.bump()


def read_lines(path: Path, offset: int) -> tuple[list[bytes], int, int]:
    """Complete lines from ``offset``: ``(lines, new offset, file size)``.

    A torn last line (a write in progress) is left for the next read.
    """
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size <= offset:
                return [], offset, size
            handle.seek(offset)
            data = handle.read(size - offset)
    except FileNotFoundError:
        return [], offset, 0
    cut = data.rfind(b"\n")
    if cut < 0:
        return [], offset, size
    lines = [line for line in data[:cut].split(b"\n") if line.strip()]
    return lines, offset + cut + 1, size


def _seq(line: bytes) -> int:
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return 0
    seq = record.get("seq") if isinstance(record, dict) else None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else 0


def _ends_line(path: Path, offset: int) -> bool:
    """True when the byte before ``offset`` is a newline (the log was not cut and regrown)."""
    if offset == 0:
        return True
    try:
        with open(path, "rb") as handle:
            handle.seek(offset - 1)
            return handle.read(1) == b"\n"
    except OSError:
        return False


def frame(line: bytes, seq: int) -> bytes:
    """One SSE message for one stored event line (JSON lines hold no raw newlines)."""
    return b"id: " + str(seq).encode() + b"\ndata: " + line + b"\n\n"


RESET_FRAME = (
    b'event: reset\ndata: {"reason": "the event log was cut; it follows from its start"}\n\n'
)


@dataclass
class Follower:
    """One listener's place in the log."""

    path: Path
    offset: int = 0
    last_seq: int = 0

    async def read(self) -> list[bytes]:
        """SSE frames for whatever was appended since the last read (with resets)."""
        out: list[bytes] = []
        size = _signature(self.path)
        if size is not None and (size[1] < self.offset or not _ends_line(self.path, self.offset)):
            out.append(RESET_FRAME)
            self.offset, self.last_seq = 0, 0
        big = size is not None and size[1] - self.offset > INLINE_READ_BYTES
        if big:
            lines, offset, _ = await to_thread.run_sync(read_lines, self.path, self.offset)
        else:
            lines, offset, _ = read_lines(self.path, self.offset)
        for line in lines:
            seq = _seq(line)
            if seq and seq <= self.last_seq:
                # The log was cut and grew again past our offset: start over.
                out = [*out, RESET_FRAME]
                self.offset, self.last_seq = 0, 0
                return [*out, *(await self.read())]
            if seq:
                self.last_seq = seq
            out.append(frame(line, seq))
        self.offset = offset
        return out

    async def skip_to(self, last_event_id: int) -> list[bytes]:
        """Position after event ``last_event_id`` (a reconnect); frames to send first."""
        lines, offset, _ = await to_thread.run_sync(read_lines, self.path, 0)
        seqs = [_seq(line) for line in lines]
        if seqs and max(seqs) < last_event_id:
            # The client saw events that no longer exist: the log was cut meanwhile.
            self.offset, self.last_seq = offset, max(seqs)
            return [RESET_FRAME, *(frame(line, s) for line, s in zip(lines, seqs, strict=True))]
        out = [frame(line, s) for line, s in zip(lines, seqs, strict=True) if s > last_event_id]
        self.offset = offset
        self.last_seq = max(seqs, default=0)
        return out


async def follow(watches: Watches, path: Path, last_event_id: int | None) -> AsyncIterator[bytes]:
    """The SSE body: the log so far (or after ``last_event_id``), then every new event."""
    watch = watches.get(path)
    watch.join()
    try:
        follower = Follower(path)
        yield b"retry: 1000\n\n"
        seen = watch.version
        if last_event_id:
            for chunk in await follower.skip_to(last_event_id):
                yield chunk
        while not watches.closing.is_set():
            frames = await follower.read()
            if frames:
                yield b"".join(frames)
            version = await watch.wait(seen, HEARTBEAT_SECONDS)
            if version == seen:
                yield b": keep-alive\n\n"
            seen = version
    finally:
        watch.leave()
