"""The append-only event log (``events.jsonl``) and its tolerant reader.

Each line is ``{"v": 1, "seq": n, "ts": "...Z", "type": ..., "payload": {...}}``.
``seq`` counts from 1. The reader skips a torn last line or a garbage line and
reports it instead of failing. ``append`` returns the byte offset just after the
new line, so checkpoints can remember where the log stood and a rewind can cut
it with one truncate instead of a rescan.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tilth.secret_filter import scrub
from tilth.session.files import append_line, fsync_dir, state_bytes
from tilth.session.schemas import SCHEMAS

LINE_HEAD = rb'\{"v": \d+, "seq": (?P<seq>\d+), "ts": "[^"]*", "type": "(?P<type>[^"\\]*)"'
"""How every line ``EventLog.append`` writes begins (its keys in this order): readers that
want only a line's ``seq`` or ``type`` match this instead of parsing the whole line."""

EVENT_SCHEMA = SCHEMAS["events"]


def utc_now() -> str:
    """Timestamp with millisecond resolution, UTC, ``Z`` suffix."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass(frozen=True)
class Event:
    """One parsed line of the log."""

    seq: int
    ts: str
    type: str
    payload: dict[str, Any]
    offset: int
    """Byte offset of the line's first byte."""
    end: int
    """Byte offset just after the line's newline."""

    def to_record(self) -> dict[str, Any]:
        """The JSON object as stored."""
        return {
            "v": EVENT_SCHEMA,
            "seq": self.seq,
            "ts": self.ts,
            "type": self.type,
            "payload": self.payload,
        }


@dataclass
class ReadReport:
    """Events read plus the lines that had to be skipped."""

    events: list[Event] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _parse(line: bytes, offset: int, end: int) -> Event | str:
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return f"not JSON ({exc.__class__.__name__})"
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        return "not an event object"
    payload = record.get("payload")
    seq = record.get("seq")
    return Event(
        # A hand-edited or foreign line may carry any seq; 0 means "unnumbered".
        seq=seq if isinstance(seq, int) and not isinstance(seq, bool) and seq > 0 else 0,
        ts=str(record.get("ts", "")),
        type=record["type"],
        payload=payload if isinstance(payload, dict) else {},
        offset=offset,
        end=end,
    )


def iter_lines(path: Path, start: int = 0) -> Iterator[tuple[bytes, int, int, bool]]:
    """Yield ``(line, offset, end, complete)`` for each line from byte ``start``."""
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return
    with handle:
        handle.seek(start)
        offset = start
        for raw in handle:
            end = offset + len(raw)
            complete = raw.endswith(b"\n")
            yield raw.rstrip(b"\n"), offset, end, complete
            offset = end


def lines_holding(path: Path, needle: bytes) -> Iterator[tuple[bytes, int, int]]:
    """Yield ``(line, offset, end)`` for each whole line of ``path`` that contains ``needle``.

    The file is read in large blocks and searched with ``bytes.find``: a scan of a long log
    for a rare event costs a read, not a Python step per line. A torn last line (no newline
    yet) is never yielded.
    """
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return
    with handle:
        carry = b""
        base = 0  # the file offset of carry's first byte
        while chunk := handle.read(_BLOCK):
            data = carry + chunk
            cut = data.rfind(b"\n") + 1
            whole, carry = data[:cut], data[cut:]
            at = 0
            while (hit := whole.find(needle, at)) >= 0:
                start = whole.rfind(b"\n", 0, hit) + 1
                end = whole.index(b"\n", hit) + 1
                yield whole[start : end - 1], base + start, base + end
                at = end
            base += cut


_BLOCK = 1 << 20


def payloads_of(path: Path, type_: str) -> Iterator[dict[str, Any]]:
    """The payload of every whole ``type_`` event in the log at ``path``, oldest first.

    Lines that cannot hold the type are skipped before parsing (``lines_holding``).
    """
    for line, _, _ in lines_holding(path, f'"{type_}"'.encode()):
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(record, dict) and record.get("type") == type_:
            payload = record.get("payload")
            yield payload if isinstance(payload, dict) else {}


def read_json_objects(path: Path) -> list[dict[str, Any]]:
    """Every complete line of ``path`` that parses as a JSON object (others skipped)."""
    out: list[dict[str, Any]] = []
    for line, _, _, complete in iter_lines(path):
        if not complete or not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


@dataclass(frozen=True)
class DamagedLine:
    """A line of an event log that is not an event: where it is and what is wrong."""

    number: int
    offset: int
    end: int
    why: str
    torn: bool
    """The last line, without its newline: a crash mid-append (the next append cuts it)."""


def damaged_lines(path: Path) -> list[DamagedLine]:
    """Every non-blank line of the log at ``path`` that readers skip, oldest first."""
    return [item for item in _classified(path) if isinstance(item, DamagedLine)]


def _classified(path: Path, start: int = 0) -> Iterator[Event | DamagedLine]:
    """Each non-blank line from byte ``start``: an event, or what keeps it from being one
    (line numbers count from ``start``)."""
    for number, (line, offset, end, complete) in enumerate(iter_lines(path, start), 1):
        if not line.strip():
            continue
        if not complete:
            why = f"torn last line ({len(line)} bytes)"
            yield DamagedLine(number, offset, end, why, torn=True)
            continue
        parsed = _parse(line, offset, end)
        if isinstance(parsed, str):
            yield DamagedLine(number, offset, end, parsed, torn=False)
        else:
            yield parsed


class EventLog:
    """Appends to and reads one session's ``events.jsonl``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._next_seq: int | None = None

    def read(self, start: int = 0) -> ReadReport:
        """Every readable event from byte ``start``; bad lines are reported, not raised."""
        report = ReadReport()
        for item in _classified(self.path, start):
            if isinstance(item, Event):
                report.events.append(item)
            else:
                report.skipped.append(f"line {item.number}: {item.why}")
        return report

    def events(self) -> list[Event]:
        """All readable events (bad lines skipped silently)."""
        return self.read().events

    def last(self, type_: str) -> Event | None:
        """The newest event of ``type_``, or None (only lines that can hold it are parsed)."""
        found = None
        for line, offset, end in lines_holding(self.path, f'"{type_}"'.encode()):
            parsed = _parse(line, offset, end)
            if isinstance(parsed, Event) and parsed.type == type_:
                found = parsed
        return found

    def size(self) -> int:
        """Current length in bytes (0 if missing)."""
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def _seq_after_tail(self) -> int:
        size = self.size()
        if size == 0:
            return 1
        window = min(size, 64 * 1024)
        with open(self.path, "rb") as handle:
            handle.seek(size - window)
            tail = handle.read()
        for line in reversed(tail.split(b"\n")):
            if not line.strip():
                continue
            parsed = _parse(line, 0, 0)
            if isinstance(parsed, Event) and parsed.seq:
                return parsed.seq + 1
        return sum(1 for _ in iter_lines(self.path)) + 1

    def _repair_torn_tail(self) -> None:
        """A crash mid-append leaves a line without newline; cut it before appending."""
        size = self.size()
        if size == 0:
            return
        with open(self.path, "rb") as handle:
            handle.seek(size - 1)
            if handle.read(1) == b"\n":
                return
            window = min(size, 1 << 20)
            handle.seek(size - window)
            tail = handle.read()
        cut = tail.rfind(b"\n")
        keep = size - window + cut + 1 if cut >= 0 else 0
        self.truncate(keep)

    def append(
        self, type_: str, payload: dict[str, Any] | None = None, *, ts: str | None = None
    ) -> Event:
        """Append one event (flushed and fsynced) and return it with its offsets; ``ts``
        keeps the time of an event copied from another log (an attempt's)."""
        if self._next_seq is None:
            self._repair_torn_tail()
            self._next_seq = self._seq_after_tail()
        seq = self._next_seq
        record: dict[str, Any] = {
            "v": EVENT_SCHEMA,
            "seq": seq,
            "ts": ts or utc_now(),
            "type": type_,
            "payload": payload or {},
        }
        line = scrub(json.dumps(record, ensure_ascii=False, default=str))
        end = append_line(self.path, line)
        self._next_seq = seq + 1
        # Offsets are in bytes: non-ASCII payloads make the line longer than its len().
        start = end - len(state_bytes(line)) - 1
        return Event(seq, record["ts"], type_, record["payload"], start, end)

    def truncate(self, offset: int) -> None:
        """Cut the log to its first ``offset`` bytes (fsynced)."""
        with open(self.path, "r+b") as handle:
            handle.truncate(offset)
            handle.flush()
            os.fsync(handle.fileno())
        fsync_dir(self.path.parent)
        self._next_seq = None
