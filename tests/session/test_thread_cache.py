"""A thread is parsed once per process: a read after an append checks only the new lines, and
a file replaced, cut or edited by another process is read again from its start."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tilth.session import thread_cache
from tilth.session.threads import Thread
from tilth.session.validate import thread_line_problem


class Counted(Thread):
    """A thread counting the lines its own line check is asked about."""

    lines = 0

    def line_problem(self, record: Any) -> str | None:
        self.lines += 1
        return thread_line_problem(record, self.key)


def checked_by_next_read(thread: Counted) -> int:
    before = thread.lines
    thread.messages()
    return thread.lines - before


def test_a_read_after_one_append_checks_one_line_however_long_the_thread(tmp_path: Path) -> None:
    short, long = Counted(tmp_path, "short"), Counted(tmp_path, "long")
    for thread, count in ((short, 1), (long, 400)):
        for n in range(count):
            thread.append({"role": "user", "content": f"message {n}"})
        thread.read()
        thread.append({"role": "assistant", "content": "one more"})
    assert checked_by_next_read(short) == checked_by_next_read(long) == 1
    assert checked_by_next_read(long) == 0
    assert long.messages()[-1] == {"role": "assistant", "content": "one more"}
    assert long.last_id() == "long#401" and len(long.read()) == 401


def test_what_a_caller_changes_is_not_what_the_next_read_returns(tmp_path: Path) -> None:
    thread = Thread(tmp_path, "chat")
    thread.append({"role": "user", "content": "hello"}, turn=1)
    first = thread.read()[0]
    first.message["content"] = "changed"
    first.meta["turn"] = 9
    thread.messages()[0]["role"] = "system"
    again = thread.read()[0]
    assert again.message == {"role": "user", "content": "hello"} and again.meta == {"turn": 1}


def test_a_thread_replaced_cut_or_regrown_elsewhere_is_read_again(tmp_path: Path) -> None:
    thread = Thread(tmp_path, "worker.T-001.implementing")
    for n in range(5):
        thread.append({"role": "user", "content": f"message {n}"})
    assert len(thread.read()) == 5
    # Another process replaced it (a rewind, an undo): same first line, fewer lines.
    other = tmp_path / "other"
    other.mkdir()
    copy = Thread(other, thread.key)
    for n in range(2):
        copy.append({"role": "user", "content": f"message {n}"})
    copy.append({"role": "user", "content": "a different third message, and longer"})
    os.replace(copy.path, thread.path)
    assert [m.message["content"] for m in thread.read()][2:] == [
        "a different third message, and longer"
    ]
    # Rewritten in place (the same file, as a copy onto it does): every line past the first
    # changed, the file as long as before.
    changed = thread.path.read_bytes().replace(b"message 1", b"MESSAGE 1")
    with open(thread.path, "r+b") as handle:
        handle.write(changed)
    assert [m.message["content"] for m in thread.read()][1] == "MESSAGE 1"
    # Gone: nothing.
    thread.path.unlink()
    assert thread.read() == []


def test_a_torn_last_line_is_read_once_it_is_whole(tmp_path: Path) -> None:
    thread = Thread(tmp_path, "chat")
    thread.append({"role": "user", "content": "one"})
    line = Thread(tmp_path / "x", "chat")
    line.append({"role": "user", "content": "two"})
    whole = line.path.read_bytes().replace(b"chat#1", b"chat#2")
    with open(thread.path, "ab") as handle:
        handle.write(whole[:10])
    assert [m.id for m in thread.read()] == ["chat#1"]
    with open(thread.path, "ab") as handle:
        handle.write(whole[10:])
    assert [m.id for m in thread.read()] == ["chat#1", "chat#2"]


def test_only_the_threads_read_last_stay_parsed(tmp_path: Path) -> None:
    threads = [Counted(tmp_path, f"t{n}") for n in range(thread_cache.KEPT + 5)]
    for thread in threads:
        thread.append({"role": "user", "content": "hi"})
        thread.read()
    assert checked_by_next_read(threads[-1]) == 0
    assert checked_by_next_read(threads[0]) == 1  # dropped: read again


def test_big_threads_are_kept_within_the_byte_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(thread_cache, "KEPT_BYTES", 10_000)
    big = [Counted(tmp_path, f"big{n}") for n in range(3)]
    for thread in big:
        thread.append({"role": "tool", "content": "x" * 6_000})
        thread.read()
    assert checked_by_next_read(big[2]) == 0  # the one read last stays, whatever its size
    assert checked_by_next_read(big[0]) == 1  # over the budget: dropped, read again
