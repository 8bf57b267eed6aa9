"""prd.json's entries travel typed (Task) and are written back exactly as the file held them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tilth.session.store import Session
from tilth.session.task import Task, task_dicts
from tilth.session.validate import InvalidPrd

ENTRIES = [
    {
        "title": "First",
        "id": "T-001",
        "description": "d",
        "acceptance_criteria": ["a", "b"],
        "note": {"kept": [1]},
        "status": "done",
    },
    {"id": "T-002", "title": "Second", "description": "", "acceptance_criteria": [], "tier": "L2"},
]


def _session(tmp_path: Path) -> Session:
    session = Session.create(tmp_path / "sessions", tmp_path)
    session.save_prd(ENTRIES)
    return session


def test_tasks_are_typed_and_write_back_the_same_entries_in_the_same_order(
    tmp_path: Path,
) -> None:
    session = _session(tmp_path)
    first, second = session.tasks()
    assert (first.id, first.title, first.status, first.tier) == ("T-001", "First", "done", None)
    assert first.acceptance_criteria == ("a", "b") and first.extra == {"note": {"kept": [1]}}
    assert (second.status, second.tier, second.is_open) == ("pending", "L2", True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.status = "failed"  # type: ignore[misc]
    before = session.prd_path.read_text()
    session.save_tasks(session.tasks())
    assert session.prd_path.read_text() == before
    assert [list(d) for d in task_dicts(session.tasks())] == [list(e) for e in ENTRIES]


def test_a_changed_status_is_a_new_task_and_lands_in_place(tmp_path: Path) -> None:
    session = _session(tmp_path)
    tasks = session.tasks()
    moved = [t.with_status("in_progress") if t.id == "T-002" else t for t in tasks]
    assert tasks[1].status == "pending" and moved[1].status == "in_progress"
    session.save_tasks(moved)
    stored = json.loads(session.prd_path.read_text())
    assert stored[0] == ENTRIES[0] and stored[1] == {**ENTRIES[1], "status": "in_progress"}
    assert Task.from_dict(stored[1]).to_dict() == stored[1]


def test_a_damaged_entry_is_refused_by_the_typed_reader_as_by_the_plain_one(
    tmp_path: Path,
) -> None:
    session = _session(tmp_path)
    session.save_prd([{**ENTRIES[0], "status": "finished"}])
    with pytest.raises(InvalidPrd, match=r"task T-001: status 'finished'") as typed:
        session.tasks()
    with pytest.raises(InvalidPrd) as plain:
        session.load_prd()
    assert str(typed.value) == str(plain.value)
