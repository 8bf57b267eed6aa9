"""Following events.jsonl: torn lines wait, cuts are noticed, reconnects resume (in-process)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.web.support import in_own_thread
from tilth.session.events import EventLog
from tilth.web.stream import RESET_FRAME, Follower


def seqs(frames: list[bytes]) -> list[int | str]:
    out: list[int | str] = []
    for frame in frames:
        if frame == RESET_FRAME:
            out.append("reset")
            continue
        data = frame.split(b"data: ", 1)[1].strip()
        out.append(json.loads(data)["seq"])
    return out


def read(follower: Follower) -> list[int | str]:
    return seqs(in_own_thread(lambda: asyncio.run(follower.read())))


def test_a_torn_last_line_is_sent_only_once_it_is_complete(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    for n in range(3):
        log.append("note", {"n": n})
    follower = Follower(log.path)
    assert read(follower) == [1, 2, 3]
    line = json.dumps({"v": 1, "seq": 4, "ts": "t", "type": "note", "payload": {}})
    with open(log.path, "a") as handle:
        handle.write(line[:10])  # a writer in the middle of its line
    assert read(follower) == []
    with open(log.path, "a") as handle:
        handle.write(line[10:] + "\n")
    assert read(follower) == [4]
    assert read(follower) == []


def test_a_cut_log_resets_even_when_it_grew_back_past_the_offset(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    for n in range(5):
        log.append("note", {"n": n})
    follower = Follower(log.path)
    assert read(follower) == [1, 2, 3, 4, 5]
    # a rewind cuts after event 2, then a run appends longer events (reusing seq 3, 4, 5, 6)
    offset = next(e.end for e in log.events() if e.seq == 2)
    log.truncate(offset)
    for n in range(4):
        log.append("note", {"n": n, "text": "x" * 50})
    assert read(follower) == ["reset", 1, 2, 3, 4, 5, 6]
    # a plain shrink is noticed too
    log.truncate(offset)
    assert read(follower) == ["reset", 1, 2]


def test_a_reconnect_resumes_after_its_last_event_id(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    for n in range(6):
        log.append("note", {"n": n})
    follower = Follower(log.path)
    assert seqs(in_own_thread(lambda: asyncio.run(follower.skip_to(4)))) == [5, 6]
    log.append("note", {"n": 6})
    assert read(follower) == [7]
    # the client saw events the log no longer has: start over
    stale = Follower(log.path)
    assert seqs(in_own_thread(lambda: asyncio.run(stale.skip_to(99)))) == [
        "reset",
        1,
        2,
        3,
        4,
        5,
        6,
        7,
    ]
