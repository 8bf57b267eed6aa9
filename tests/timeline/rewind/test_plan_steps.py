"""A go-back plan is a header plus frozen steps: what users and journals see derives from
the steps, in the one flat record every version of Tilth writes and reads."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import FrozenInstanceError, replace
from typing import Any

import pytest

from tests.timeline.conftest import World
from tilth.config import load_settings
from tilth.timeline.controller import TimelineController
from tilth.timeline.rewind.executor import steps_for
from tilth.timeline.rewind.plan import RewindPlan
from tilth.timeline.rewind.steps import CutEvents, CutThreads, RecordUndo, RestoreCode

FLAT_KEYS = [
    "schema", "op", "op_id", "session_id", "target", "target_label", "scope", "worktree",
    "head", "overlay", "keep", "force", "stash_message", "state", "threads", "event_offset",
    "keep_through_seq", "delete_paths", "note", "event", "before", "before_seq", "drop_seqs",
    "keep_seqs", "archive", "event_cut", "recorded", "unwind", "fork", "graft",
    "snapshot_code", "headline", "files", "commits_dropped", "commits_restored",
    "events_dropped", "event_types", "task_changes", "messages_dropped", "threads_deleted",
    "checkpoints_dropped", "conflicts", "details", "warnings",
]  # fmt: skip
"""The journal's flat record of a plan (and ``--json``'s, the web API's): the keys the
42-field plan of earlier versions wrote, in their order."""


def _json(record: dict[str, Any]) -> Any:
    """``record`` as a journal holds it (written and read back)."""
    return json.loads(json.dumps(record))


def _plans(world: World) -> dict[str, RewindPlan]:
    controller = TimelineController(world.session, load_settings())
    start = controller.resolve("T-002")
    return {
        "rewind": controller.plan_rewind(start, "both", survey=True),
        "code": controller.plan_rewind(start, "code"),
        "conversation": controller.plan_rewind(start, "conversation"),
        "restart": controller.plan_restart("T-001", "implementing"),
        "reset": controller.plan_reset_to_seed(),
        "fork": controller.plan_fork(start),
    }


def test_every_plan_round_trips_through_its_flat_record(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone()
    for name, plan in _plans(world).items():
        record = plan.to_dict()
        assert list(record) == FLAT_KEYS, name
        again = RewindPlan.from_dict(_json(record))
        assert _json(again.to_dict()) == _json(record), name
        assert again.render() == plan.render(), name
        assert steps_for(again) == steps_for(plan), name
        assert [type(s) for s in again.steps] == [type(s) for s in plan.steps], name


def test_what_a_person_reads_derives_from_the_steps(world_clone: Callable[..., World]) -> None:
    world = world_clone()
    plan = _plans(world)["rewind"]
    assert plan.find(RestoreCode) and plan.find(CutEvents) and plan.find(RecordUndo)
    text = plan.render()
    assert "events: " in text and "code: reset the worktree" in text and "undo: " in text
    # Take the log's step away: its line, its keys and its journal step go with it.
    without = replace(plan, steps=tuple(s for s in plan.steps if not isinstance(s, CutEvents)))
    assert "events: " not in without.render()
    assert without.to_dict()["event_offset"] is None and "events" not in steps_for(without)
    assert "events" in steps_for(plan)
    # The counts of the event and the operations log are the steps' too.
    threads = plan.find(CutThreads)
    assert threads is not None
    assert plan.summary()["messages_dropped"] == sum(threads.messages_dropped.values())
    assert plan.summary()["files"] == len(plan.files) > 0
    # Steps are values: nothing changes one once it is planned.
    code = plan.find(RestoreCode)
    assert code is not None
    with pytest.raises(FrozenInstanceError):
        code.head = "0" * 40  # type: ignore[misc]


def test_a_record_of_the_old_shape_becomes_the_same_steps() -> None:
    """A journal the 42-field plan wrote (here a restart's, as its to_dict made it) is read
    into steps that run the journal steps it listed."""
    old = {key: None for key in FLAT_KEYS}
    old.update(
        schema=2,
        op="restart",
        op_id="op-1",
        session_id="s",
        target="cp-0003",
        target_label="task_start T-001",
        scope="both",
        worktree="/nowhere",
        head="a" * 40,
        overlay={},
        keep={},
        force=False,
        stash_message="tilth restart T-001 now",
        state={"prd": [], "tasks": {}, "ledger": {}},
        threads={"worker.T-001.planning": None},
        event_offset=120,
        keep_through_seq=3,
        delete_paths=[],
        event={"type": "restart", "payload": {"task_id": "T-001"}},
        before="before-restart",
        before_seq=9,
        drop_seqs=[4, 5],
        snapshot_code=False,
        headline="restart T-001",
        files=[["restore", "a.py"]],
        commits_dropped=[["b" * 40, "task/T-001: complete planning stage"]],
        commits_restored=[],
        events_dropped=7,
        event_types={"turn": 7},
        task_changes=[["T-001", "done", "pending"]],
        messages_dropped={"worker.T-001.planning": 2},
        threads_deleted=[],
        checkpoints_dropped=2,
        conflicts=["scratch.txt"],
        details=["stages that will re-run: planning"],
        warnings=[],
    )
    plan = RewindPlan.from_dict(old)
    assert steps_for(plan) == [
        "before", "stash", "code", "state", "ledger", "threads", "events", "checkpoints",
        "log", "finish",
    ]  # fmt: skip
    assert plan.files == [("restore", "a.py")] and plan.before_seq == 9
    assert plan.summary()["stashed"] is True and plan.summary()["tasks"] == {"T-001": "pending"}
    assert "uncommitted changes, stashed (1):" in plan.render()
    assert _json(plan.to_dict()) == old
