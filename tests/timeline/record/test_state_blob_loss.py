"""A checkpoint whose state blob is lost: naming it says so, and never lands on another one."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli
from tests.timeline.conftest import build_world
from tilth.timeline import list_checkpoints
from tilth.timeline.record.blob_store import BlobStore
from tilth.timeline.record.checkpoints import checkpoints_dir


def _lose_state_of(tilth_home: Path, seq: int, checkpoints: list) -> str:
    """Delete the state blobs only checkpoint ``seq`` names; returns its id."""
    target = next(cp for cp in checkpoints if cp.seq == seq)
    others = set().union(*(cp.state_blobs() for cp in checkpoints if cp.seq != seq))
    only = target.state_blobs() - others
    assert only
    for blob in only:
        BlobStore.for_home(tilth_home).delete(blob)
    return target.id


def test_latest_with_a_lost_state_is_an_error_not_the_checkpoint_before(
    tilth_home: Path, tmp_path: Path
) -> None:
    world = build_world(tmp_path / "w", ("L1",), turns=1)
    checkpoints = list_checkpoints(world.session)
    latest = _lose_state_of(tilth_home, checkpoints[-1].seq, checkpoints)
    env = {"TILTH_SESSIONS_DIR": str(world.sessions_dir)}
    planned = run_cli(
        "rewind", world.session.id, "--to", "latest", "--dry-run", env=env, cwd=tmp_path
    )
    # Before: a plan to the checkpoint before it, as if it were the latest.
    assert planned.returncode != 0, planned.stdout
    assert checkpoints[-2].id not in planned.stdout
    assert latest in planned.stderr and "missing" in planned.stderr, planned.stderr


def test_the_seed_with_a_lost_state_is_named_not_said_to_be_absent(
    tilth_home: Path, tmp_path: Path
) -> None:
    world = build_world(tmp_path / "w", ("L1",), turns=1)
    checkpoints = list_checkpoints(world.session)
    seed = _lose_state_of(tilth_home, checkpoints[0].seq, checkpoints)
    env = {"TILTH_SESSIONS_DIR": str(world.sessions_dir)}
    planned = run_cli(
        "rewind", world.session.id, "--to", "seed", "--dry-run", env=env, cwd=tmp_path
    )
    assert planned.returncode != 0
    assert "no checkpoint 'seed'" not in planned.stderr
    assert seed in planned.stderr and "missing" in planned.stderr, planned.stderr
    # Every other checkpoint still goes back as before.
    other = run_cli(
        "rewind", world.session.id, "--to", checkpoints[2].id, "--dry-run", env=env, cwd=tmp_path
    )
    assert other.returncode == 0, other.stderr
    listed = json.loads(
        run_cli("checkpoints", world.session.id, "--json", env=env, cwd=tmp_path).stdout
    )
    assert [cp["id"] for cp in listed] == [cp.id for cp in checkpoints[1:]]


def test_a_rewind_past_a_checkpoint_with_a_lost_state_drops_it_too(
    tilth_home: Path, tmp_path: Path
) -> None:
    world = build_world(tmp_path / "w", ("L1",), turns=1)
    checkpoints = list_checkpoints(world.session)
    lost = _lose_state_of(tilth_home, checkpoints[-1].seq, checkpoints)
    env = {"TILTH_SESSIONS_DIR": str(world.sessions_dir)}
    target = checkpoints[-3].id
    done = run_cli("rewind", world.session.id, "--to", target, "--yes", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # Before: the later checkpoint whose state was lost stayed on the timeline, after the
    # target, as if it were still to come.
    remaining = sorted(p.stem for p in checkpoints_dir(world.session).glob("cp-*.json"))
    assert lost not in remaining, remaining
    listed = run_cli("checkpoints", world.session.id, env=env, cwd=tmp_path)
    assert "unreadable" not in listed.stderr, listed.stderr


def test_the_doctor_names_a_checkpoint_whose_state_is_lost(
    tilth_home: Path, tmp_path: Path
) -> None:
    world = build_world(tmp_path / "w", ("L1",), turns=1)
    checkpoints = list_checkpoints(world.session)
    seed = _lose_state_of(tilth_home, checkpoints[0].seq, checkpoints)
    env = {"TILTH_SESSIONS_DIR": str(world.sessions_dir)}
    doctor = run_cli("doctor", world.session.id, "--json", env=env, cwd=tmp_path)
    # Before: "no problems found", while `rewind --to seed` could not be done.
    found = json.loads(doctor.stdout)["problems"]
    assert [p["problem"] for p in found] == ["checkpoints"], found
    assert seed in found[0]["what"] and "missing" in found[0]["what"]
    assert found[0]["fix"] is None and found[0]["hint"]


def test_undo_with_the_newest_undo_point_lost_is_an_error_not_an_older_undo(
    tilth_home: Path, tmp_path: Path
) -> None:
    world = build_world(tmp_path / "w", ("L1",), turns=1)
    session = world.session
    env = {"TILTH_SESSIONS_DIR": str(world.sessions_dir)}
    for target in ("cp-0008", "cp-0004"):
        went = run_cli("rewind", session.id, "--to", target, "--yes", env=env, cwd=tmp_path)
        assert went.returncode == 0, went.stderr
    points = [cp for cp in list_checkpoints(session) if cp.is_before]
    assert len(points) == 2
    # The newest undo point's file names a prd blob the store no longer holds.
    path = checkpoints_dir(session) / f"{points[-1].id}.json"
    data = json.loads(path.read_text("utf-8"))
    data["state"]["prd"] = "0" * 64
    path.write_text(json.dumps(data), "utf-8")
    undo = run_cli("rewind", session.id, "--undo", "--dry-run", env=env, cwd=tmp_path)
    # Before: a plan back to the older undo point, as if the newest were not there.
    assert undo.returncode != 0, undo.stdout
    assert points[0].id not in undo.stdout
    assert points[-1].id in undo.stderr and "missing" in undo.stderr, undo.stderr


def test_a_restart_whose_task_start_state_is_lost_is_an_error_not_a_bare_commit(
    tilth_home: Path, tmp_path: Path
) -> None:
    world = build_world(tmp_path / "w", ("L1", "L1"), turns=1)
    session = world.session
    start = next(cp for cp in list_checkpoints(session) if cp.kind == "task_start")
    path = checkpoints_dir(session) / f"{start.id}.json"
    data = json.loads(path.read_text("utf-8"))
    data["state"]["prd"] = "0" * 64  # a blob the store does not hold
    path.write_text(json.dumps(data), "utf-8")
    env = {"TILTH_SESSIONS_DIR": str(world.sessions_dir)}
    planned = run_cli("restart", session.id, start.task_id, "--dry-run", env=env, cwd=tmp_path)
    # Before: a plan to the task's base commit alone, its conversation and log kept.
    assert planned.returncode != 0, planned.stdout
    assert start.id in planned.stderr and "missing" in planned.stderr, planned.stderr
