"""`tilth fork`: a new session equal to a checkpoint, the original untouched."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import run_cli_in_process
from tests.timeline.test_capture_rewind import Driver, _cli, _session
from tests.trees import tree_hash
from tilth import git
from tilth.session.store import Session
from tilth.timeline import list_checkpoints, resolve_checkpoint
from tilth.timeline.rewind.journal import read_operations

SESSION_ID = re.compile(r"(?<!op-)\b\d{8}-\d{6}-[0-9a-f]{6}\b")
"""A session id (an operation id, ``op-`` + the same shape, is not one)."""


def _session_files(session: Session) -> dict[str, bytes]:
    """Every file of the session dir but the worktree, locks and the operations log."""
    out = {}
    for path in sorted(session.dir.rglob("*")):
        rel = path.relative_to(session.dir).as_posix()
        skip = rel.startswith(("workspace", ".lock")) or rel == "timeline/operations.jsonl"
        if path.is_file() and not skip:
            out[rel] = path.read_bytes()
    return out


def _built(tilth_home: Path, tmp_path: Path) -> tuple[Driver, list[str]]:
    driver = Driver(_session(tmp_path, tilth_home / "sessions"))
    ids = [
        driver.turn(("write_file", {"path": "src/a.py", "content": "a = 1\n"})),
        driver.turn(("bash", {"command": "echo b > b.txt && rm README.md"})),
        driver.turn(("write_file", {"path": "src/a.py", "content": "a = 3\n"})),
    ]
    driver.session.ledger.append("T-001", {"verdict": "reject"})
    driver.session.log("evaluator_verdict", task_id="T-001", verdict="reject")
    return driver, ids


def test_fork_equals_the_checkpoint_and_leaves_the_original_alone(
    tilth_home: Path, tmp_path: Path
) -> None:
    driver, ids = _built(tilth_home, tmp_path)
    parent = driver.session
    target = resolve_checkpoint(parent, ids[1])
    before_files = _session_files(parent)
    before_tree, before_head = tree_hash(driver.worktree), git.head(driver.worktree)
    branch_head = git.rev_parse(parent.branch, driver.worktree)

    result = _cli(tilth_home / "sessions", "fork", parent.id, "--at", target.id, "--json")
    assert result.returncode == 0, result.stderr
    made = json.loads(result.stdout)
    child = Session.open(tilth_home / "sessions", made["session_id"])
    child_tree = Path(made["workspace"])

    # The child is the checkpoint: code, conversation, harness state, timeline.
    assert tree_hash(child_tree) == driver.trees[target.id]
    assert git.head(child_tree) == target.head
    assert git.git("rev-parse", "--abbrev-ref", "HEAD", cwd=child_tree).strip() == child.branch
    assert child.events.path.read_bytes().startswith(
        parent.events.path.read_bytes()[: target.event_offset]
    )
    assert [e.type for e in child.events.events()][-1] == "fork"
    assert child.threads.heads() == target.threads
    assert [c.id for c in list_checkpoints(child)] == [
        c.id for c in list_checkpoints(parent) if c.seq <= target.seq
    ]
    assert child.ledger.count("T-001") == target.state["ledger"].get("T-001", 0) == 0
    record = child.record().to_dict()
    assert record["parent_session"] == parent.id
    assert record["forked_from"]["checkpoint"] == target.id
    assert record["branch"] == child.branch and "fork_incomplete" not in record

    # The original: byte-identical apart from its operations log, same branch head and tree.
    assert _session_files(parent) == before_files
    assert (tree_hash(driver.worktree), git.head(driver.worktree)) == (before_tree, before_head)
    assert git.rev_parse(parent.branch, driver.worktree) == branch_head
    assert read_operations(parent)[-1]["kind"] == "fork"
    assert read_operations(parent)[-1]["child_session"] == child.id

    listing = _cli(tilth_home / "sessions", "sessions", "--json")
    rows = {row["id"]: row for row in json.loads(listing.stdout)}
    assert rows[child.id]["parent"] == parent.id

    # The fork has a working timeline of its own.
    back = _cli(tilth_home / "sessions", "rewind", child.id, "--to", ids[0], "-y")
    assert back.returncode == 0, back.stderr
    assert tree_hash(child_tree) == driver.trees[ids[0]]
    assert tree_hash(driver.worktree) == before_tree


def test_fork_at_the_seed_and_a_clear_error_without_at(tilth_home: Path, tmp_path: Path) -> None:
    driver, _ = _built(tilth_home, tmp_path)
    missing = _cli(tilth_home / "sessions", "fork", driver.session.id)
    assert missing.returncode == 2 and "--at" in missing.stderr
    assert "Traceback" not in missing.stderr
    seeded = _cli(tilth_home / "sessions", "fork", driver.session.id, "--at", "seed", "--json")
    assert seeded.returncode == 0, seeded.stderr
    child_tree = Path(json.loads(seeded.stdout)["workspace"])
    seed = resolve_checkpoint(driver.session, "seed")
    assert git.head(child_tree) == seed.head and not git.is_dirty(child_tree)
    child = Session.open(tilth_home / "sessions", json.loads(seeded.stdout)["session_id"])
    assert child.record().status == "prepared"
    assert child.threads.heads() == seed.threads


def test_a_dry_run_shows_no_session_id_that_the_fork_will_not_have(
    tilth_home: Path, tmp_path: Path
) -> None:
    """A dry run's plan is thrown away, so the id it reserved is never the fork's."""
    driver, ids = _built(tilth_home, tmp_path)
    sessions = tilth_home / "sessions"
    parent = driver.session.id
    dry = run_cli_in_process(
        "fork", parent, "--at", ids[1], "--dry-run", env={"TILTH_SESSIONS_DIR": str(sessions)}
    )
    assert dry.returncode == 0, dry.stderr
    assert set(SESSION_ID.findall(dry.stdout)) == {parent}, dry.stdout
    assert f"at {ids[1]}" in dry.stdout and "into <new id>" in dry.stdout
    assert "branch session/<new id>" in dry.stdout
    assert "<new id>: the new session's id is assigned when the fork is made" in dry.stdout
    as_json = run_cli_in_process(
        "fork", parent, "--at", ids[1], "--dry-run", "--json",
        env={"TILTH_SESSIONS_DIR": str(sessions)},
    )  # fmt: skip
    plan = json.loads(as_json.stdout)
    assert plan["op"] == "fork" and plan["fork"]["child"] is None
    assert plan["fork"]["branch"] == "session/<new id>"
    assert set(SESSION_ID.findall(as_json.stdout)) == {parent}
    assert [p.name for p in sessions.iterdir()] == [parent], "a dry run makes nothing"

    made = _cli(sessions, "fork", parent, "--at", ids[1], "--json")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["session_id"] != parent


def test_an_interrupted_fork_is_completed_by_the_parents_next_command(
    tilth_home: Path, tmp_path: Path
) -> None:
    import signal

    driver, ids = _built(tilth_home, tmp_path)
    parent = driver.session
    before = _session_files(parent)
    sessions = tilth_home / "sessions"
    killed = _cli(sessions, "fork", parent.id, "--at", ids[1], TILTH_FAULT_AT="fork-files")
    assert killed.returncode == -signal.SIGKILL
    (half,) = [p.name for p in sessions.iterdir() if p.name != parent.id]
    record = Session.open(sessions, half).record().to_dict()
    assert record["fork_incomplete"] is True and record["status"] == "failed"
    journaled = _session_files(parent)
    assert set(journaled) - set(before) == {"timeline/journal.json"}
    listed = _cli(sessions, "checkpoints", parent.id)
    assert listed.returncode == 0, listed.stderr
    assert "finished an interrupted fork" in listed.stderr
    assert _session_files(parent) == before
    child = Session.open(sessions, half)
    record = child.record().to_dict()
    target = resolve_checkpoint(parent, ids[1])
    assert "fork_incomplete" not in record and record["forked_from"]["checkpoint"] == ids[1]
    assert tree_hash(Path(record["workspace"])) == driver.trees[ids[1]]
    assert child.threads.heads() == target.threads
    gone = _cli(sessions, "reset", half, "-y")
    assert gone.returncode == 0, gone.stderr
    assert not (sessions / half).exists()
