"""The event log: seq, byte offsets, fsync, and a reader that survives damage."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest

from tilth.session.events import EVENT_SCHEMA, EventLog


@pytest.fixture
def log(tmp_path: Path) -> EventLog:
    path = tmp_path / "events.jsonl"
    path.touch()
    return EventLog(path)


def test_append_assigns_monotonic_seq_from_one(log: EventLog) -> None:
    events = [log.append("tool_call", {"n": n}) for n in range(5)]
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    # A fresh reader (another process, later) continues the count.
    assert EventLog(log.path).append("stop", {"reason": "all_done"}).seq == 6
    assert [e.seq for e in log.events()] == [1, 2, 3, 4, 5, 6]


def test_records_carry_schema_ts_type_payload(log: EventLog) -> None:
    log.append("session_start", {"source": "/r"})
    record = json.loads(log.path.read_text().splitlines()[0])
    assert record["v"] == EVENT_SCHEMA
    assert record["type"] == "session_start"
    assert record["payload"] == {"source": "/r"}
    assert record["ts"].endswith("Z")
    assert log.append("x").payload == {}


def test_offsets_are_byte_positions(log: EventLog) -> None:
    events = [
        log.append("model_call", {"text": "plain"}),
        log.append("model_call", {"text": "naïve café ✓ 日本"}),
        log.append("model_call", {"text": "after"}),
    ]
    data = log.path.read_bytes()
    assert events[0].offset == 0
    for a, b in itertools.pairwise(events):
        assert a.end == b.offset
    assert events[-1].end == len(data)
    for event in events:
        chunk = data[event.offset : event.end]
        assert chunk.endswith(b"\n")
        assert json.loads(chunk)["seq"] == event.seq
    read = log.events()
    assert [(e.offset, e.end) for e in read] == [(e.offset, e.end) for e in events]


def test_read_from_an_offset(log: EventLog) -> None:
    first = log.append("a")
    log.append("b")
    log.append("c")
    assert [e.type for e in log.read(first.end).events] == ["b", "c"]


def test_append_is_fsynced(log: EventLog, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    log.append("commit", {"sha": "abc"})
    assert str(log.path) in synced


def test_reader_reports_a_torn_last_line(log: EventLog) -> None:
    log.append("a")
    log.append("b")
    with open(log.path, "ab") as handle:
        handle.write(b'{"v": 1, "seq": 3, "type": "c", "pay')
    report = log.read()
    assert [e.type for e in report.events] == ["a", "b"]
    assert len(report.skipped) == 1 and "torn" in report.skipped[0]
    assert "line 3" in report.skipped[0]


def test_reader_reports_a_garbage_line_and_keeps_going(log: EventLog) -> None:
    log.append("a")
    with open(log.path, "ab") as handle:
        handle.write(b"this is not json\n")
        handle.write(b"[1, 2, 3]\n")
        handle.write(b"\n")
        handle.write(b"\xff\xfe\n")
    log.append("b")
    report = log.read()
    assert [e.type for e in report.events] == ["a", "b"]
    assert len(report.skipped) == 3
    assert "line 2" in report.skipped[0] and "not JSON" in report.skipped[0]
    assert "not an event" in report.skipped[1]


def test_append_after_a_torn_tail_repairs_it(log: EventLog) -> None:
    log.append("a")
    log.append("b")
    good_size = log.size()
    with open(log.path, "ab") as handle:
        handle.write(b'{"v": 1, "seq": 3, "ty')
    event = EventLog(log.path).append("c")
    assert event.seq == 3
    assert event.offset == good_size
    report = log.read()
    assert report.skipped == []
    assert [(e.seq, e.type) for e in report.events] == [(1, "a"), (2, "b"), (3, "c")]


def test_append_to_a_file_that_is_only_a_torn_line(log: EventLog) -> None:
    log.path.write_bytes(b'{"v": 1, "se')
    assert log.append("first").seq == 1
    assert log.read().skipped == []


def test_seq_continues_past_a_garbage_last_line(log: EventLog) -> None:
    log.append("a")
    log.append("b")
    with open(log.path, "ab") as handle:
        handle.write(b"garbage\n")
    assert EventLog(log.path).append("c").seq == 3


def test_truncate_cuts_at_a_checkpoint_offset(log: EventLog) -> None:
    log.append("a")
    mark = log.append("b")
    log.append("c")
    log.truncate(mark.end)
    assert [e.type for e in log.events()] == ["a", "b"]
    assert log.append("d").seq == 3
    assert [e.seq for e in log.events()] == [1, 2, 3]


def test_last_and_missing_file(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "none.jsonl")
    assert log.events() == [] and log.size() == 0 and log.last("stop") is None
    log.append("stop", {"reason": "wall_clock"})
    log.append("stop", {"reason": "all_done"})
    last = log.last("stop")
    assert last is not None and last.payload["reason"] == "all_done"


def test_odd_but_valid_json_lines_never_crash_the_reader(log: EventLog) -> None:
    log.append("a")
    with open(log.path, "ab") as handle:
        for line in (
            '{"type": "x", "seq": "abc"}',
            '{"type": "y", "seq": [1], "payload": "not a dict"}',
            '{"type": "z", "seq": true}',
            '{"type": 5}',
            '"just a string"',
        ):
            handle.write(line.encode() + b"\n")
    report = log.read()
    assert [(e.type, e.seq) for e in report.events] == [("a", 1), ("x", 0), ("y", 0), ("z", 0)]
    assert report.events[2].payload == {}
    assert len(report.skipped) == 2
    assert log.append("b").seq == 2  # numbering continues from the last numbered event
