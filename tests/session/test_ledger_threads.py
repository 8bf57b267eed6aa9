"""Evaluator ledgers and conversation threads: append-only files with stable ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilth.session.ledger import LEDGER_SCHEMA, Ledger
from tilth.session.threads import Thread, Threads, message_number


# ---- ledger ---------------------------------------------------------------------------
def test_ledger_append_and_read(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")
    assert ledger.read("T-001") == [] and ledger.task_ids() == []
    written = ledger.append("T-001", {"iter": 1, "verdict": {"verdict": "reject"}})
    assert written["schema"] == LEDGER_SCHEMA and written["ts"].endswith("Z")
    ledger.append("T-001", {"iter": 2, "verdict": {"verdict": "accept"}})
    ledger.append("T-002", {"iter": 1})
    assert [e["iter"] for e in ledger.read("T-001")] == [1, 2]
    assert ledger.path("T-001") == tmp_path / "ledger" / "T-001.jsonl"
    assert ledger.task_ids() == ["T-001", "T-002"]
    assert ledger.count("T-001") == 2
    lines = ledger.path("T-001").read_text().splitlines()
    assert json.loads(lines[0])["verdict"] == {"verdict": "reject"}


def test_ledger_limit_keeps_the_newest(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")
    for n in range(1, 6):
        ledger.append("T-001", {"iter": n})
    assert [e["iter"] for e in ledger.read("T-001", limit=2)] == [4, 5]
    assert [e["iter"] for e in ledger.read("T-001", limit=50)] == [1, 2, 3, 4, 5]
    assert ledger.read("T-001", limit=0) == []


def test_ledger_survives_a_torn_tail_and_garbage(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")
    ledger.append("T-001", {"iter": 1})
    with open(ledger.path("T-001"), "ab") as handle:
        handle.write(b"garbage\n")
        handle.write(b'{"iter": 9')
    assert [e["iter"] for e in ledger.read("T-001")] == [1]
    ledger.append("T-001", {"iter": 2})  # must not be glued onto the torn line
    assert [e["iter"] for e in ledger.read("T-001")] == [1, 2]


# ---- threads --------------------------------------------------------------------------
def msg(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_thread_ids_are_stable_and_sequential(tmp_path: Path) -> None:
    thread = Threads(tmp_path / "threads").get("worker.T-001")
    ids = [thread.append(msg(str(n)), turn=n).id for n in range(3)]
    assert ids == ["worker.T-001#1", "worker.T-001#2", "worker.T-001#3"]
    assert [message_number(i) for i in ids] == [1, 2, 3]
    again = Thread(tmp_path / "threads", "worker.T-001")
    assert [m.id for m in again.read()] == ids
    assert again.read()[1].meta == {"turn": 1}
    assert again.messages() == [msg("0"), msg("1"), msg("2")]
    assert again.last_id() == ids[-1]


def test_truncate_after_keeps_prefix_and_never_reuses_ids(tmp_path: Path) -> None:
    thread = Threads(tmp_path / "threads").get("chat")
    ids = [thread.append(msg(str(n))).id for n in range(4)]
    dropped = thread.truncate_after(ids[1])
    assert [m.id for m in dropped] == ids[2:]
    assert [m.id for m in thread.read()] == ids[:2]
    assert thread.append(msg("new")).id == "chat#5"
    # Dropping everything still never hands out an old number.
    thread.truncate_after(None)
    assert thread.read() == []
    assert thread.last_id() is None
    assert thread.append(msg("again")).id == "chat#6"


def test_truncate_after_unknown_id_and_noop(tmp_path: Path) -> None:
    thread = Threads(tmp_path / "threads").get("chat")
    first = thread.append(msg("a")).id
    with pytest.raises(KeyError):
        thread.truncate_after("chat#99")
    assert thread.truncate_after(first) == []
    assert [m.id for m in thread.read()] == [first]


def test_thread_torn_tail_is_skipped_then_repaired(tmp_path: Path) -> None:
    thread = Threads(tmp_path / "threads").get("worker")
    thread.append(msg("a"))
    with open(thread.path, "ab") as handle:
        handle.write(b'{"v": 1, "id": "worker#2", "mess')
    assert [m.id for m in thread.read()] == ["worker#1"]
    assert thread.append(msg("b")).id == "worker#2"
    assert thread.messages() == [msg("a"), msg("b")]


def test_bad_thread_keys_are_refused(tmp_path: Path) -> None:
    for key in ("", "a/b", "../x", "has space"):
        with pytest.raises(ValueError):
            Thread(tmp_path, key)


def test_heads_names_every_thread(tmp_path: Path) -> None:
    threads = Threads(tmp_path / "threads")
    assert threads.keys() == [] and threads.heads() == {}
    threads.get("worker").append(msg("a"))
    threads.get("worker").append(msg("b"))
    threads.get("evaluator").append(msg("c"))
    assert threads.keys() == ["evaluator", "worker"]
    assert threads.heads() == {"evaluator": "evaluator#1", "worker": "worker#2"}


def test_thread_lines_with_bad_ids_are_skipped(tmp_path: Path) -> None:
    thread = Threads(tmp_path / "threads").get("chat")
    thread.append(msg("a"))
    with open(thread.path, "ab") as handle:
        handle.write(b'{"v": 1, "message": {"role": "user", "content": "no id"}}\n')
        handle.write(b'{"v": 1, "id": "chat", "message": {"role": "user", "content": "x"}}\n')
        handle.write(b'{"v": 1, "id": "chat#2", "message": {"role": "user"}, "meta": [1]}\n')
    stored = thread.read()
    assert [m.id for m in stored] == ["chat#1", "chat#2"]
    assert stored[1].meta == {}
    assert thread.append(msg("b")).id == "chat#3"
