"""The timeline's cheap readers and idempotent writers, on real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilth.errors import SessionCorrupt, UsageError
from tilth.session.events import EventLog
from tilth.session.store import Session
from tilth.session.threads import Threads
from tilth.timeline.record.checkpoints import checkpoints_dir, read_timeline, resolve_checkpoint
from tilth.timeline.record.state_capture import log_tail, thread_heads
from tilth.timeline.rewind.change_report import tally_events
from tilth.timeline.rewind.journal import journal_path
from tilth.timeline.rewind.state_restore import cut_lines, truncate_thread


def test_tally_counts_top_level_types_only_from_the_offset(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    log.append("session_start", {})
    middle = log.append("model_call", {"nested": {"v": 1, "seq": 2, "ts": "x", "type": "fake"}})
    log.append("tool_call", {"text": '\n{"v": 1, "seq": 9, "ts": "", "type": "sneaky"}'})
    log.append("tool_call", {})
    assert tally_events(log.path, 0) == {"model_call": 1, "session_start": 1, "tool_call": 2}
    assert tally_events(log.path, middle.end) == {"tool_call": 2}
    assert tally_events(log.path, log.size()) == {}


def test_log_tail_ignores_a_torn_line_and_reads_past_the_window(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    assert log_tail(log.path) == (0, 0)
    log.append("a", {})
    log.append("b", {"blob": "x" * 200_000})  # longer than the 64 KB tail window
    size = log.size()
    assert log_tail(log.path) == (size, 2)
    with open(log.path, "ab") as handle:
        handle.write(b'{"v": 1, "seq": 3, "ts": "t", "ty')
    assert log_tail(log.path) == (size + 33, 2)


def test_thread_heads_match_the_full_reader(tmp_path: Path) -> None:
    threads = Threads(tmp_path / "threads")
    threads.get("worker").append({"role": "user", "content": "x" * 100_000})
    threads.get("worker").append({"role": "assistant", "content": "ok"})
    threads.get("evaluator").append({"role": "user", "content": "hi"})
    threads.get("empty").rewrite([])
    assert thread_heads(threads.directory) == threads.heads()


def test_truncate_thread_cuts_by_message_number(tmp_path: Path) -> None:
    threads = Threads(tmp_path / "threads")
    thread = threads.get("worker")
    for n in range(5):
        thread.append({"role": "user", "content": str(n)})
    assert truncate_thread(threads.directory, "worker", "worker#3") == 2
    assert [m.id for m in thread.read()] == ["worker#1", "worker#2", "worker#3"]
    assert truncate_thread(threads.directory, "worker", "worker#3") == 0
    assert thread.append({"role": "user", "content": "new"}).id == "worker#6", "ids never reused"


def test_cut_lines_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_text("a\nb\nc\n")
    assert cut_lines(path, 2) == 1
    assert cut_lines(path, 2) == 0
    assert path.read_text() == "a\nb\n"
    assert cut_lines(path, 0) == 2 and not path.exists()


def _session(tmp_path: Path) -> Session:
    return Session.create(tmp_path / "sessions", tmp_path)


def test_a_bad_checkpoint_file_loses_only_itself(tmp_path: Path) -> None:
    session = _session(tmp_path)
    directory = checkpoints_dir(session)
    directory.mkdir(parents=True)
    good = {"id": "cp-0002", "seq": 2, "kind": "turn", "head": "a" * 40, "event_offset": 0}
    (directory / "cp-0001.json").write_text("[1, 2]")
    (directory / "cp-0002.json").write_text(json.dumps(good))
    (directory / "cp-0003.json").write_text(json.dumps({"id": "cp-0003"}))
    timeline = read_timeline(session)
    assert [c.id for c in timeline.checkpoints] == ["cp-0002"]
    assert len(timeline.problems) == 2
    assert "missing field(s)" in timeline.problems[1]
    with pytest.raises(UsageError, match="no checkpoint 'T-001/planning'"):
        resolve_checkpoint(session, "T-001/planning")


def test_a_corrupt_journal_is_reported_not_guessed(tmp_path: Path) -> None:
    from tilth.timeline import recover

    session = _session(tmp_path)
    journal_path(session).parent.mkdir(parents=True)
    journal_path(session).write_text("{not json")
    with pytest.raises(SessionCorrupt):
        recover(session)
