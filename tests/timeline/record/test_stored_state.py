"""Checkpoint files name the prd and task states by blob id: their size no longer grows with
the tasks done, old inline files still read and restore, and retention keeps what they name."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import run_cli
from tests.timeline.conftest import build_world
from tilth.config import load_settings
from tilth.session.files import atomic_write_json
from tilth.timeline import TimelineController, list_checkpoints, read_timeline
from tilth.timeline.record.blob_store import BlobStore
from tilth.timeline.record.checkpoints import checkpoint_path, checkpoints_dir
from tilth.timeline.record.retention import collect
from tilth.timeline.record.state_capture import read_harness_state

BIG = "x" * 3000
"""Carried into every stage output of a task state: each task's state is then ~12 kB."""


def _files_by_task(checkpoints: Path) -> dict[str, list[int]]:
    sizes: dict[str, list[int]] = {}
    for path in sorted(checkpoints.glob("cp-*.json")):
        task = json.loads(path.read_text("utf-8")).get("task_id")
        if task:
            sizes.setdefault(task, []).append(path.stat().st_size)
    return sizes


def test_a_checkpoint_file_does_not_grow_with_the_state_of_the_tasks_done(
    tilth_home: Path, tmp_path: Path
) -> None:
    world = build_world(tmp_path / "w", ("L1",) * 8, turns=1, run=False)
    assert world.sim is not None
    world.sim.run(salt=BIG)
    sizes = _files_by_task(checkpoints_dir(world.session))
    first, last = sizes["T-001"], sizes["T-008"]
    per_task = (sum(last) / len(last) - sum(first) / len(first)) / 7
    # Inline, each task done added its whole state (~12 kB) to every later file; by blob id
    # it adds one reference (plus its threads' heads and ledger count).
    assert per_task < 400, per_task
    assert max(max(s) for s in sizes.values()) < 6000
    # Read back, a checkpoint holds the state itself, as it was on disk.
    latest = list_checkpoints(world.session)[-1]
    now = read_harness_state(world.session).to_dict()
    assert latest.state == now
    assert BIG in json.dumps(latest.state["tasks"]["T-008"])
    assert latest.state_blobs()


def test_an_inline_checkpoint_of_the_previous_schema_reads_and_restores(
    tilth_home: Path, tmp_path: Path
) -> None:
    world = build_world(tmp_path / "w", ("L1", "L1"), turns=1)
    session = world.session
    target = next(cp for cp in list_checkpoints(session) if cp.kind == "stage")
    state = json.loads(json.dumps(target.state))
    # What Tilth wrote before this schema: the whole state inline, schema 2.
    old = {**target.to_dict(), "schema": 2}
    assert "state_blobs" not in old and old["state"]["tasks"]
    atomic_write_json(checkpoint_path(session, target.seq), old)
    read = read_timeline(session)
    assert read.problems == []
    again = next(cp for cp in read.checkpoints if cp.seq == target.seq)
    assert again.state == state and again.state_blobs() == set()

    timeline = TimelineController(session)
    with timeline.writing():
        timeline.execute(timeline.plan_rewind(timeline.resolve(target.id), "both"))
    assert session.load_prd() == state["prd"]
    tasks = {p.stem: json.loads(p.read_text("utf-8")) for p in session.tasks_dir.glob("*.json")}
    assert tasks == state["tasks"]
    # The undo point the rewind recorded is of the new schema, and undo brings the run back.
    point = list_checkpoints(session)[-1]
    assert point.is_before
    raw = json.loads(checkpoint_path(session, point.seq).read_text("utf-8"))
    assert raw["schema"] == 3 and raw["state_blobs"] == ["prd", "tasks"]
    with timeline.writing():
        timeline.execute(timeline.plan_undo())
    assert {t["status"] for t in session.load_prd()} == {"done"}


def test_retention_keeps_the_state_blobs_named_and_sweeps_the_rest(
    tilth_home: Path, tmp_path: Path
) -> None:
    world = build_world(tmp_path / "w", ("L1", "L1"), turns=1)
    session = world.session
    settings = load_settings({"TILTH_HOME": str(tilth_home)})
    store = BlobStore.for_home(tilth_home)
    named = set().union(*(cp.state_blobs() for cp in list_checkpoints(session)))
    assert named and all(store.has(b) for b in named)
    collect(settings, grace_seconds=0)
    assert all(store.has(b) for b in named), "a blob only a task state names is kept"

    # A rewind to the seed archives the later checkpoint files for its undo: still kept.
    timeline = TimelineController(session)
    with timeline.writing():
        timeline.execute(timeline.plan_rewind(timeline.resolve("seed"), "both"))
    collect(settings, grace_seconds=0)
    assert all(store.has(b) for b in named)
    with timeline.writing():
        timeline.execute(timeline.plan_undo())
    assert read_timeline(session).problems == []
    assert {t["status"] for t in session.load_prd()} == {"done"}

    # A reset to the seed drops them for good: what only they named goes.
    with timeline.writing():
        timeline.execute(timeline.plan_reset_to_seed())
    kept = set().union(*(cp.state_blobs() for cp in list_checkpoints(session)))
    collect(settings, grace_seconds=0)
    assert kept and all(store.has(b) for b in kept)
    assert not any(store.has(b) for b in named - kept)


def test_a_missing_state_blob_makes_its_checkpoint_unreadable_not_wrong(
    tilth_home: Path, tmp_path: Path
) -> None:
    world = build_world(tmp_path / "w", ("L1",), turns=1)
    session = world.session
    checkpoints = list_checkpoints(session)
    latest = checkpoints[-1]
    only_latest = latest.state_blobs() - set().union(*(c.state_blobs() for c in checkpoints[:-1]))
    assert only_latest
    for blob in only_latest:
        BlobStore.for_home(tilth_home).delete(blob)
    # A new process (this one keeps the states it parsed: a blob never changes).
    listed = run_cli(
        "checkpoints",
        session.id,
        "--json",
        env={"TILTH_SESSIONS_DIR": str(world.sessions_dir)},
        cwd=tmp_path,
    )
    assert listed.returncode == 0, listed.stderr
    assert [cp["id"] for cp in json.loads(listed.stdout)] == [cp.id for cp in checkpoints[:-1]]
    assert f"{latest.id}.json: unreadable" in listed.stderr and "missing" in listed.stderr


def test_a_capture_sees_a_task_file_rewritten_under_the_same_stat(
    tilth_home: Path, tmp_path: Path
) -> None:
    world = build_world(tmp_path / "w", ("L1",), turns=1)
    session = world.session
    path = session.tasks_dir / "T-001.json"
    old = path.stat()
    os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns - 10**10))  # settled: trusted by stat
    settled = path.stat()
    before = read_harness_state(session).to_dict()["tasks"]["T-001"]
    assert read_harness_state(session).to_dict()["tasks"]["T-001"] is before  # not read again
    # Rewritten in place, same size, its mtime put back: only the ctime tells.
    text = path.read_text("utf-8")
    changed = text.replace('"planning"', '"PLANNING"', 1)
    assert changed != text and len(changed) == len(text)
    with open(path, "r+", encoding="utf-8") as handle:
        handle.write(changed)
    os.utime(path, ns=(settled.st_atime_ns, settled.st_mtime_ns))
    assert (path.stat().st_ino, path.stat().st_size) == (settled.st_ino, settled.st_size)
    after = read_harness_state(session).to_dict()["tasks"]["T-001"]
    assert after == json.loads(changed) != before
