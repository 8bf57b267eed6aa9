"""Records written by the previous schema still open, and a newer one is refused plainly."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.agent.support import TASKS, recipes, seed_session
from tests.timeline.conftest import World
from tests.timeline.simrun import fingerprint, timeline_of
from tilth import ScriptedModel, load_settings, run
from tilth.agent.task_state import TaskState
from tilth.demo.script import Team
from tilth.errors import SessionCorrupt
from tilth.model import Script
from tilth.session.migrations import CURRENT, MIGRATIONS, upgrade
from tilth.session.schemas import SCHEMAS, version_key
from tilth.session.store import Session
from tilth.timeline import list_checkpoints, plan_rewind, recover, resolve_checkpoint
from tilth.timeline.rewind.executor import execute_rewind
from tilth.timeline.rewind.journal import Journal, journal_path, write_journal

# What the previous Tilth (before undo and chat) wrote.
OLD_PLAN_FIELDS = {
    "op", "op_id", "session_id", "target", "target_label", "scope", "worktree", "head",
    "overlay", "keep", "force", "stash_message", "state", "threads", "event_offset",
    "keep_through_seq", "delete_paths", "note", "event", "headline", "files",
    "commits_dropped", "commits_restored", "events_dropped", "event_types", "task_changes",
    "messages_dropped", "threads_deleted", "checkpoints_dropped", "conflicts", "details",
    "warnings",
}  # fmt: skip
OLD_STEPS = ["code", "state", "ledger", "threads", "events", "checkpoints", "log", "finish"]


def test_migrations_are_numbered_in_order_and_reach_the_current_schemas() -> None:
    numbers = [m.number for m in MIGRATIONS]
    assert numbers == sorted(numbers) == list(range(1, len(numbers) + 1))
    assert CURRENT is SCHEMAS
    for kind in {m.kind for m in MIGRATIONS}:
        assert max(m.schema for m in MIGRATIONS if m.kind == kind) == SCHEMAS[kind], kind
    assert {"session": 2, "checkpoint": 3, "plan": 2, "task": 2}.items() <= SCHEMAS.items()


def test_every_writer_stamps_from_the_one_table() -> None:
    from tilth.agent.records import SUMMARY_SCHEMA
    from tilth.agent.task_state import TASK_STATE_SCHEMA
    from tilth.environment.worktree_env import SCHEMA as WORKTREE_ENV_SCHEMA
    from tilth.seed.interview import SEED_META_SCHEMA
    from tilth.seed.sink import INTENT_SCHEMA
    from tilth.session.events import EVENT_SCHEMA
    from tilth.session.ledger import LEDGER_SCHEMA
    from tilth.session.store import CHECKPOINT_SCHEMA
    from tilth.session.threads import THREAD_SCHEMA
    from tilth.timeline.record.checkpoints import CHECKPOINT_FILE_SCHEMA
    from tilth.timeline.record.dir_state import MANIFEST_SCHEMA
    from tilth.timeline.rewind.code_state import CODE_STATE_SCHEMA
    from tilth.timeline.rewind.journal import JOURNAL_SCHEMA, OPS_SCHEMA
    from tilth.timeline.rewind.plan import PLAN_SCHEMA
    from tilth.timeline.rewind.undo_archive import ARCHIVE_SCHEMA

    written = {
        "summary": SUMMARY_SCHEMA, "task": TASK_STATE_SCHEMA, "seed-meta": SEED_META_SCHEMA,
        "intent": INTENT_SCHEMA, "events": EVENT_SCHEMA, "ledger": LEDGER_SCHEMA,
        "session": CHECKPOINT_SCHEMA, "threads": THREAD_SCHEMA,
        "checkpoint": CHECKPOINT_FILE_SCHEMA, "manifest": MANIFEST_SCHEMA,
        "code-state": CODE_STATE_SCHEMA, "journal": JOURNAL_SCHEMA, "ops": OPS_SCHEMA,
        "plan": PLAN_SCHEMA, "archive": ARCHIVE_SCHEMA, "worktree-env": WORKTREE_ENV_SCHEMA,
    }  # fmt: skip
    assert written == SCHEMAS


def test_a_line_record_numbered_with_the_old_key_is_read_by_it() -> None:
    assert version_key("ledger") == "schema" and version_key("events") == "v"
    with pytest.raises(SessionCorrupt, match="newer Tilth"):
        upgrade("ledger", {"v": 99, "turn": 1}, where="ledger/T-001.jsonl")
    assert upgrade("ledger", {"v": 1, "turn": 1})["turn"] == 1


def test_a_session_of_the_previous_schema_opens(world_clone: Callable[..., World]) -> None:
    world = world_clone(("L1",), 1)
    session = world.session
    record = json.loads(session.checkpoint_path.read_text())
    record.pop("kind", None)
    record["schema"] = 1
    session.checkpoint_path.write_text(json.dumps(record))
    for path in (session.dir / "timeline" / "checkpoints").glob("cp-*.json"):
        old = json.loads(path.read_text())
        old.pop("archive", None)
        old["schema"] = 1
        path.write_text(json.dumps(old))
    reopened = Session.open(world.sessions_dir, session.id)
    assert reopened.record().kind == "run"
    assert reopened.record().schema == 2
    assert all(c.archive is None for c in list_checkpoints(reopened))
    assert resolve_checkpoint(reopened, "T-001/planning").kind == "stage"
    listed = world.cli_here("checkpoints", session.id)
    assert listed.returncode == 0 and "unreadable" not in listed.stdout + listed.stderr
    reopened.set_status("running")  # the next write stores the current schema
    assert json.loads(session.checkpoint_path.read_text())["schema"] == 2


def test_a_rewind_journaled_by_the_previous_schema_is_finished(
    world_clone: Callable[..., World],
) -> None:
    done = world_clone(("L1", "L1"), 1)
    target = resolve_checkpoint(done.session, "T-001/planning")
    with done.session.lock():
        execute_rewind(done.session, plan_rewind(done.session, target, "both"))
    expected = fingerprint(done.session)
    expected["checkpoints"] = [f"{c.id}.json" for c in timeline_of(done.session)]

    world = world_clone(("L1", "L1"), 1)
    plan = plan_rewind(world.session, resolve_checkpoint(world.session, "T-001/planning"), "both")
    old = {k: v for k, v in plan.to_dict().items() if k in OLD_PLAN_FIELDS}
    old["schema"] = 1
    # Killed by the previous Tilth just after its first step started.
    write_journal(world.session, Journal(plan.op_id, old, OLD_STEPS, started=["code"]))
    with world.session.lock():
        message = recover(world.session)
    assert message and "finished an interrupted rewind" in message
    assert not journal_path(world.session).exists()
    now = fingerprint(world.session)
    assert not [c for c in list_checkpoints(world.session) if c.is_before]
    for key in ("tree", "head", "files", "checkpoint"):
        assert now[key] == expected[key], key
    assert now["checkpoints"] == expected["checkpoints"]


def test_a_record_from_a_newer_tilth_is_refused_with_a_plain_message(tmp_path: Path) -> None:
    with pytest.raises(SessionCorrupt, match="written by a newer Tilth"):
        upgrade("session", {"schema": 99, "session_id": "x"}, where="checkpoint.json")
    session = Session.create(tmp_path / "sessions", tmp_path)
    data = json.loads(session.checkpoint_path.read_text())
    session.checkpoint_path.write_text(json.dumps({**data, "schema": 99}))
    with pytest.raises(SessionCorrupt, match="newer Tilth"):
        session.record().to_dict()


def test_every_record_of_a_real_run_carries_its_schema_key(repo: Path, sessions_dir: Path) -> None:
    """Every record carries ``schema`` but events.jsonl's lines (``v``, SPEC §4's shape).
    Not: prd.json (a list, SPEC §4),
    summary.json (derived, rebuilt from the log every time, numbered ``version`` as the
    reference's is), seed-meta.json (the test helper's own; the seed sink's has ``schema``)."""
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    script = Script(Team(recipes()))
    stop = run(
        seeded.session,
        worker=ScriptedModel(script, "worker"),
        evaluator=ScriptedModel(script, "evaluator"),
        settings=load_settings(
            {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "TILTH_SANDBOX": "off"}
        ),
    )
    assert stop.reason == "all_done", stop
    session_dir = seeded.session.dir
    missing = []
    for path in sorted(session_dir.rglob("*.json*")):
        if "workspace" in path.relative_to(session_dir).parts:
            continue
        if path.name in ("prd.json", "summary.json", "seed-meta.json"):
            continue
        if path.suffix == ".jsonl":
            records = [json.loads(line) for line in path.read_text().splitlines() if line]
            key = "v" if path.name == "events.jsonl" else "schema"
            missing += [f"{path.name}: line {i}" for i, r in enumerate(records) if key not in r]
        elif "schema" not in json.loads(path.read_text()):
            missing.append(str(path.relative_to(session_dir)))
    assert missing == []


def test_a_task_state_of_the_previous_schema_opens_and_a_newer_one_is_refused(
    tmp_path: Path,
) -> None:
    session = Session.create(tmp_path / "sessions", tmp_path)
    path = TaskState.path(session, "T-001")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"task_id": "T-001", "stages_done": ["planning"], "v": 1}))
    state = TaskState.load(session, "T-001")
    assert state.stages_done == ["planning"]
    state.save(session)
    saved = json.loads(path.read_text())
    assert saved["schema"] == CURRENT["task"] and "v" not in saved
    path.write_text(json.dumps({**saved, "schema": 99}))
    with pytest.raises(SessionCorrupt, match="newer Tilth"):
        TaskState.load(session, "T-001")
