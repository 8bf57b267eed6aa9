"""Server-Sent Events that follow a session's ``events.jsonl`` as it grows.

One ``LogWatch`` per session stats the log (and its epoch file) every ``POLL_SECONDS``
while anyone listens and wakes its listeners when either changes; each listener reads
the new complete lines from its own byte offset, so no event is sent twice or skipped.
Listeners at the same place (every one that has caught up) share one read per change.

Every event goes out as ``id: <epoch>-<seq>`` plus the stored JSON line. ``seq`` starts
over where a rewind, restart, undo or reset cuts the log, so it alone would name two
events; the epoch (``tilth.timeline.record.log_epoch``) counts those cuts, so an id is
never used for a second event. A cut is noticed — the epoch moved, or (a log cut by
hand) the log shrank or the next line's ``seq`` does not follow — and the listener gets
``event: reset`` and then the log again from its start, under the new epoch. A reconnect
with ``Last-Event-ID: <epoch>-<seq>`` resumes after that event when the log was not cut
since; otherwise it gets ``event: reset`` and the log from its start.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from anyio import to_thread

from tilth.session import LINE_HEAD, read_at
from tilth.timeline import epoch_path, read_epoch

POLL_SECONDS = 0.05
HEARTBEAT_SECONDS = 15.0
INLINE_READ_BYTES = 256 * 1024
"""Reads up to this size happen on the event loop; bigger backlogs go to a thread."""
CUT_SETTLE_SECONDS = 0.25
"""A log seen cut while its epoch stayed: how long to wait for the epoch to follow (the
timeline raises it right after its cut); a log cut by hand never moves it."""


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _signatures(path: Path) -> tuple[object, ...]:
    """The log's and its epoch file's: a change to either wakes the listeners."""
    return (_signature(path), _signature(epoch_path(path.parent)))


def _epoch(path: Path) -> int:
    return read_epoch(path.parent)


def event_id(epoch: int, seq: int) -> str:
    """The SSE id of event ``seq`` of the log's ``epoch``: ``<epoch>-<seq>``."""
    return f"{epoch}-{seq}"


def parse_event_id(raw: str) -> tuple[int, int] | None:
    """``(epoch, seq)`` from a ``Last-Event-ID``; None when it is not one this stream sends.
    A bare number (an id from before epochs) counts as epoch 0."""
    text = raw.strip()
    epoch, dash, seq = text.rpartition("-")
    if not dash:
        epoch = "0"
    if not (epoch.isdigit() and seq.isdigit()) or not epoch.isascii() or not seq.isascii():
        return None
    return int(epoch), int(seq)


Place = tuple[int | None, int, int]
"""A follower's place in a log: ``(epoch, offset, last seq)``."""


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
    reads: dict[Place, tuple[Place, bytes]] = field(default_factory=dict)
    """This version's finished reads: a follower's place before → its place after, and the
    frames it was sent. Cleared at every change."""

    async def _poll(self, last: tuple[object, ...]) -> None:
        while self.listeners > 0:
            await asyncio.sleep(POLL_SECONDS)
            now = _signatures(self.path)
            if now != last:
                last = now
                await self.bump()

    async def bump(self) -> None:
        """Wake everyone (also called directly after this server cut the log itself)."""
        self.version += 1
        self.reads = {}
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()

    def join(self) -> None:
        self.listeners += 1
        if self.task is None or self.task.done():
            # The signature is taken now, before the joining follower reads the log: a change
            # made after that read but before the task first runs must still count as one.
            start = _signatures(self.path)
            self.task = asyncio.get_running_loop().create_task(self._poll(start))

    def leave(self) -> None:
        self.listeners -= 1
        if self.listeners == 0:
            self.reads = {}  # read again by nobody: no copy of the log is kept

    async def read(self, follower: Follower) -> bytes:
        """What ``follower`` has not been sent yet, read once per place and change.

        A read made since the last change is as good as a new one: any later change bumps
        the version, which clears these and wakes the follower to read again.
        """
        version, before = self.version, follower.place()
        done = self.reads.get(before)
        if done is not None:
            after, payload = done
            follower.move_to(after)
            return payload
        payload = b"".join(await follower.read())
        if self.version == version:
            self.reads[before] = (follower.place(), payload)
        return payload

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

    def __len__(self) -> int:
        """How many logs are watched (those somebody follows now)."""
        return len(self._watches)

    def held_bytes(self) -> int:
        """The bytes of finished reads kept for other listeners to share."""
        return sum(len(payload) for w in self._watches.values() for _, payload in w.reads.values())

    def leave(self, watch: LogWatch) -> None:
        """``watch`` loses a listener; with its last one it is forgotten (a server follows
        many sessions over its life, and each watch keeps its last read)."""
        watch.leave()
        if watch.listeners == 0 and self._watches.get(watch.path) is watch:
            del self._watches[watch.path]

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
        data, size = read_at(path, offset)
    except FileNotFoundError:
        return [], offset, 0
    if not data:
        return [], offset, size
    cut = data.rfind(b"\n")
    if cut < 0:
        return [], offset, size
    lines = [line for line in data[:cut].split(b"\n") if line.strip()]
    return lines, offset + cut + 1, size


_SEQ_PREFIX = re.compile(LINE_HEAD)
"""A line ``EventLog`` wrote: its ``seq`` without parsing the rest (a stream reads each line
once per follower, and a tool result can be a long line)."""


UNREADABLE = -1
"""The ``seq`` of a line that is no JSON object (torn, or damaged by hand): never sent."""


def _seq(line: bytes) -> int:
    written = _SEQ_PREFIX.match(line)
    if written and line.endswith(b"}"):
        return int(written.group("seq"))
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return UNREADABLE
    if not isinstance(record, dict):
        return UNREADABLE
    seq = record.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else 0


def _ends_line(path: Path, offset: int) -> bool:
    """True when the byte before ``offset`` is a newline (the log was not cut and regrown)."""
    if offset == 0:
        return True
    try:
        return read_at(path, offset - 1, 1)[0] == b"\n"
    except OSError:
        return False


def frame(line: bytes, epoch: int, seq: int) -> bytes:
    """One SSE message for one stored event line (JSON lines hold no raw newlines); a line
    without a ``seq`` (written by hand) gets no id, so it never repeats one."""
    ident = b"id: " + event_id(epoch, seq).encode() + b"\n" if seq else b""
    return ident + b"data: " + line + b"\n\n"


RESET_FRAME = (
    b'event: reset\ndata: {"reason": "the event log was cut; it follows from its start"}\n\n'
)


@dataclass
class Follower:
    """One listener's place in the log: the epoch it reads under, its offset, its last seq."""

    path: Path
    offset: int = 0
    last_seq: int = 0
    epoch: int | None = None

    def place(self) -> Place:
        return (self.epoch, self.offset, self.last_seq)

    def move_to(self, place: Place) -> None:
        self.epoch, self.offset, self.last_seq = place

    async def read(self) -> list[bytes]:
        """SSE frames for whatever was appended since the last read (with resets)."""
        out: list[bytes] = []
        for _ in range(8):  # a log cut again and again while we read: try again next wake
            epoch = _epoch(self.path)
            if self.epoch is None:
                self.epoch = epoch
            if epoch == self.epoch and self._looks_cut():
                epoch = await self._epoch_after_cut(epoch)
                self._start_over(out, epoch)
            elif epoch != self.epoch:
                self._start_over(out, epoch)
            lines, offset = await self._lines(self.offset)
            if _epoch(self.path) != self.epoch:
                continue  # cut while we read: the lines may be the new log's
            frames = self._frames(lines)
            if frames is None:
                # The log was cut and grew again past our offset: start over.
                self._start_over(out, await self._epoch_after_cut(self.epoch))
                continue
            self.offset = offset
            return [*out, *frames]
        return out

    async def skip_to(self, last: tuple[int, int]) -> list[bytes]:
        """Position after the event ``last`` names (a reconnect); frames to send first."""
        epoch, seq = last
        self.epoch = _epoch(self.path)
        lines, offset = await self._lines(0)
        seqs = [_seq(line) for line in lines]
        if epoch != self.epoch or _epoch(self.path) != self.epoch or seq > max(seqs, default=0):
            # The log was cut since the client's event (or it names one that never was):
            # the next read sends it from its start, under the current epoch.
            self.offset, self.last_seq, self.epoch = 0, 0, None
            return [RESET_FRAME]
        self.offset = offset
        self.last_seq = max(seqs, default=0)
        return [frame(ln, epoch, s) for ln, s in zip(lines, seqs, strict=True) if s > seq]

    def _looks_cut(self) -> bool:
        size = _signature(self.path)
        return size is not None and (
            size[1] < self.offset or not _ends_line(self.path, self.offset)
        )

    async def _epoch_after_cut(self, epoch: int) -> int:
        """The epoch once the timeline has counted the cut it is making (a hand-made cut
        never moves it: then the same epoch, after ``CUT_SETTLE_SECONDS``)."""
        deadline = asyncio.get_running_loop().time() + CUT_SETTLE_SECONDS
        while asyncio.get_running_loop().time() < deadline:
            now = _epoch(self.path)
            if now != epoch:
                return now
            await asyncio.sleep(0.01)
        return _epoch(self.path)

    def _start_over(self, out: list[bytes], epoch: int) -> None:
        if not out or out[-1] != RESET_FRAME:
            out.append(RESET_FRAME)
        self.offset, self.last_seq, self.epoch = 0, 0, epoch

    async def _lines(self, offset: int) -> tuple[list[bytes], int]:
        size = _signature(self.path)
        if size is not None and size[1] - offset > INLINE_READ_BYTES:
            lines, end, _ = await to_thread.run_sync(read_lines, self.path, offset)
        else:
            lines, end, _ = read_lines(self.path, offset)
        return lines, end

    def _frames(self, lines: list[bytes]) -> list[bytes] | None:
        """Frames for ``lines``; None when a ``seq`` goes backwards (the log was cut)."""
        assert self.epoch is not None
        frames: list[bytes] = []
        last = self.last_seq
        for line in lines:
            seq = _seq(line)
            if seq == UNREADABLE:
                continue  # a client's JSON.parse would throw on it
            if seq and seq <= last:
                return None
            if seq:
                last = seq
            frames.append(frame(line, self.epoch, seq))
        self.last_seq = last
        return frames


async def follow(
    watches: Watches, path: Path, last_event_id: tuple[int, int] | None
) -> AsyncIterator[bytes]:
    """The SSE body: the log so far (or after ``last_event_id``), then every new event."""
    watch = watches.get(path)
    watch.join()
    try:
        follower = Follower(path)
        yield b"retry: 1000\n\n"
        seen = watch.version
        if last_event_id is not None:
            for chunk in await follower.skip_to(last_event_id):
                yield chunk
        while not watches.closing.is_set():
            payload = await watch.read(follower)
            if payload:
                yield payload
            version = await watch.wait(seen, HEARTBEAT_SECONDS)
            if version == seen:
                yield b": keep-alive\n\n"
            seen = version
    finally:
        watches.leave(watch)
