"""The harness state a checkpoint fixes travels typed (HarnessState) and is written back
byte for byte: a real run's checkpoints, old ones missing keys, and damaged ones."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.timeline.conftest import World
from tilth.health.recorded import status_now
from tilth.session.files import dumps
from tilth.session.harness_state import HarnessState
from tilth.session.store import Session
from tilth.session.task import Task
from tilth.session.validate import InvalidPrd
from tilth.timeline.record.blob_store import session_store
from tilth.timeline.record.checkpoints import checkpoints_dir, list_checkpoints, read_checkpoint
from tilth.timeline.record.state_capture import read_harness_state
from tilth.timeline.record.stored_state import store_state
from tilth.timeline.rewind.state_restore import restore_files


def test_a_real_runs_checkpoints_read_typed_and_write_back_byte_identical(
    base_worlds: Callable[..., World],
) -> None:
    session = base_worlds().session
    files = sorted(checkpoints_dir(session).glob("cp-*.json"))
    assert len(files) > 4
    kinds = set()
    store = session_store(session)
    for path in files:
        stored = path.read_text(encoding="utf-8")
        raw = json.loads(stored)
        kinds.add(raw["kind"])
        # The file names the prd and task states by blob id; read, they are the state itself.
        state = HarnessState.from_dict(read_checkpoint(session, path).state)
        assert state.problem is None, (path.name, state.problem)
        assert state.prd is not None and all(isinstance(t, Task) for t in state.prd)
        assert [t.id for t in state.prd] == ["T-001", "T-002"]
        assert isinstance(state.status, str) and isinstance(state.tokens_used, int)
        on_disk = store_state(session, state.to_dict(), store).on_disk
        assert dumps({**raw, "state": on_disk}) == stored
    assert {"seed", "task_start", "stage", "turn"} <= kinds
    last = HarnessState.from_dict(list_checkpoints(session)[-1].state)
    assert last.task_statuses() == {"T-001": "done", "T-002": "done"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        last.status = "running"  # type: ignore[misc]
    # What the recorder reads now is typed the same way.
    assert read_harness_state(session).prd == last.prd


def test_an_old_state_missing_keys_reads_and_writes_back_only_what_it_holds() -> None:
    for old in ({}, {"status": "running"}, {"prd": None, "tokens_used": 3, "later": [1]}):
        state = HarnessState.from_dict(old)
        assert state.problem is None and state.to_dict() == old
        assert list(state.to_dict()) == list(old)
    assert not HarnessState.from_dict({}).has("status")
    moved = HarnessState.from_dict({"tokens_used": 3}).with_status("running")
    assert moved.to_dict() == {"tokens_used": 3, "status": "running"}


DAMAGED = {
    "prd": ["oops", {"id": "T-001"}],
    "tasks": {},
    "ledger": {"T-001": "many"},
    "progress_lines": 0,
    "tokens_used": 7,
    "status": "running",
}


def test_a_damaged_state_is_named_kept_as_recorded_and_restored_as_before(
    world_clone: Callable[..., World],
) -> None:
    state = HarnessState.from_dict(DAMAGED)
    assert state.prd is None and dict(state.ledger) == {}
    assert state.problem is not None
    assert "prd: entry #1 is not an object" in state.problem
    assert "ledger: not an object of line counts" in state.problem
    assert dumps(state.to_dict()) == dumps(DAMAGED)
    assert (state.status, state.tokens_used) == ("running", 7)
    # A go-back to it writes prd.json as recorded, so the run's reader names the damage.
    session: Session = world_clone().session
    restore_files(session, DAMAGED)
    with pytest.raises(InvalidPrd, match="entry #1 is not an object"):
        session.tasks()
    assert session.record().status == "running" and session.tokens_used == 7
    # The doctor's reading of the record takes a damaged checkpoint's status as it did
    # (a checkpoint past the last stop, as one recorded after it would be).
    latest = list_checkpoints(session)[-1]
    path = checkpoints_dir(session) / f"{latest.id}.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    # Written inline, as a file before schema 3 held its state.
    raw.pop("state_blobs", None)
    after_stop = {**raw, "event_seq": 10**6, "state": {**DAMAGED, "status": "failed"}}
    path.write_text(dumps(after_stop), encoding="utf-8")
    assert status_now(session, list_checkpoints(session)) == "failed"


def test_a_state_that_is_not_an_object_is_named_not_fatal(tmp_path: Path) -> None:
    state = HarnessState.from_dict(["junk"])
    assert state.problem == "harness state is list, not an object"
    assert state.status is None and state.task_statuses() == {}
