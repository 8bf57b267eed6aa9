"""Following events.jsonl: torn lines wait, cuts are noticed, ids never repeat, reconnects
resume (in-process)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.web.support import in_own_thread
from tilth.session.events import EventLog
from tilth.timeline.record.log_epoch import raise_epoch
from tilth.web.stream import RESET_FRAME, Follower, parse_event_id


def seqs(frames: list[bytes]) -> list[int | str]:
    out: list[int | str] = []
    for frame in frames:
        if frame == RESET_FRAME:
            out.append("reset")
            continue
        data = frame.split(b"data: ", 1)[1].strip()
        out.append(json.loads(data)["seq"])
    return out


def ids(frames: list[bytes]) -> list[str]:
    return [f.split(b"\n", 1)[0].decode() for f in frames]


def read(follower: Follower) -> list[int | str]:
    return seqs(in_own_thread(lambda: asyncio.run(follower.read())))


def skip(follower: Follower, last: str) -> list[int | str]:
    parsed = parse_event_id(last)
    assert parsed is not None
    return seqs(in_own_thread(lambda: asyncio.run(follower.skip_to(parsed))))


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
    assert skip(follower, "0-4") == [5, 6]
    log.append("note", {"n": 6})
    assert read(follower) == [7]
    # the client saw events the log no longer has: start over
    stale = Follower(log.path)
    assert skip(stale, "0-99") == ["reset"]
    assert read(stale) == [1, 2, 3, 4, 5, 6, 7]
    # an id from before epochs (a bare seq) is epoch 0
    assert skip(Follower(log.path), "6") == [7]


def test_a_cut_the_timeline_counts_gives_new_ids_and_restarts_reconnects(
    tmp_path: Path,
) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    for n in range(5):
        log.append("note", {"n": n})
    follower = Follower(log.path)
    first = in_own_thread(lambda: asyncio.run(follower.read()))
    assert ids(first) == [f"id: 0-{n}" for n in range(1, 6)]
    # A rewind cuts after event 2 and counts the cut; the log grows past where it was.
    log.truncate(next(e.end for e in log.events() if e.seq == 2))
    raise_epoch(tmp_path, "op-1")
    for n in range(5):
        log.append("note", {"n": n})
    again = in_own_thread(lambda: asyncio.run(follower.read()))
    assert again[0] == RESET_FRAME
    assert ids(again[1:]) == [f"id: 1-{n}" for n in range(1, 8)]
    # A reconnect from before the cut starts over; one from after it resumes.
    assert skip(Follower(log.path), "0-5") == ["reset"]
    assert skip(Follower(log.path), "1-5") == [6, 7]
    # The same operation counts once (a go-back finished by recovery).
    assert raise_epoch(tmp_path, "op-1") == 1


def test_every_line_the_event_log_writes_gives_its_seq_without_a_full_parse(
    tmp_path: Path,
) -> None:
    """Followers read each line's ``seq`` from the prefix ``EventLog`` writes (a long tool
    result is not parsed once per open stream); a line of another shape is still parsed."""
    from tilth.web.stream import _SEQ_PREFIX, _seq

    log = EventLog(tmp_path / "events.jsonl")
    for n in range(3):
        log.append("note", {"text": "x" * 10 * n, "nested": {"seq": 99}})
    lines = (tmp_path / "events.jsonl").read_bytes().splitlines()
    assert [_seq(line) for line in lines] == [1, 2, 3]
    assert all(_SEQ_PREFIX.match(line) for line in lines)
    assert _seq(b'{"seq": 5, "v": 1}') == 5
    assert _seq(b'{"v": 1, "seq": 7, "ts": "torn') == -1, "never streamed"
