"""Damaged state is named and repaired, never fatal (issue #24, findings 3, 5, 6, 7 and 8).

Each test damages one file of a real session (T-001 done, T-002 failed on the iteration
cap, built once: ``tests/doctor_story.py``) and drives the real CLI: a listing
still shows every session, ``run``/``resume`` refuse a task list they cannot run with a
one-line error naming the entry, the doctor names the problem, and ``--repair`` brings
back a session that resumes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent.support import TASKS, model_env, recipes, seed_session, team_server, tilth
from doctor_story import Story

from tilth.demo.script import Team


@pytest.fixture
def story(saved_story: Story) -> Story:
    return saved_story.restore()


def _listing(story: Story) -> dict[str, Any]:
    listed = story.cli("sessions", "--json")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    rows = {row["id"]: row for row in json.loads(listed.stdout)}
    table = story.cli("sessions")
    assert table.returncode == 0, table.stderr
    assert story.sid in table.stdout
    return rows


def _resumes(story: Story) -> None:
    """The repaired session resumes and finishes its failed task."""
    with team_server(Team(recipes())) as server:
        resumed = story.cli("resume", story.sid, TILTH_BASE_URL=server.base_url)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert story.statuses() == {"T-001": "done", "T-002": "done"}


def _doctor_names(story: Story, *words: str) -> None:
    diagnosed = story.cli("doctor", story.sid)
    assert diagnosed.returncode == 1, diagnosed.stdout + diagnosed.stderr
    for word in words:
        assert word in diagnosed.stdout, diagnosed.stdout


def _repair(story: Story) -> None:
    repaired = story.cli("doctor", story.sid, "--repair", "-y")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    healthy = story.cli("doctor", story.sid)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr


def test_a_checkpoint_json_of_wrong_types_is_listed_named_and_rebuilt(story: Story) -> None:
    story.session.checkpoint_path.write_text('{"status": 5, "source": 7}')
    rows = _listing(story)
    assert rows[story.sid]["problem"] and "checkpoint.json" in rows[story.sid]["problem"]
    assert "damaged: " in story.cli("sessions").stdout
    _doctor_names(story, "checkpoint.json")
    _repair(story)
    _resumes(story)


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        ("path-like id", "'../../../../PWNED'"),
        ("deeply nested", "nested too deeply"),
        ("unknown status", "'banana'"),
    ],
)
def test_a_damaged_prd_json_is_refused_named_and_restored(
    story: Story, damage: str, named: str
) -> None:
    tasks = story.session.load_prd()
    before = json.loads(json.dumps(tasks))
    if damage == "path-like id":
        tasks[1]["id"] = "../../../../PWNED"
        text = json.dumps(tasks)
    elif damage == "unknown status":
        tasks[1]["status"] = "banana"
        text = json.dumps(tasks)
    else:
        text = "[" * 50_000 + "]" * 50_000
    story.session.prd_path.write_text(text)
    rows = _listing(story)
    assert rows[story.sid]["problem"] and named in rows[story.sid]["problem"]
    refused = story.cli("resume", story.sid)
    # A rule broken is exit 2 (SPEC §5.2); a file that does not parse is damage, exit 1.
    assert refused.returncode == (1 if damage == "deeply nested" else 2), refused.stderr
    assert named in refused.stderr and f"tilth doctor {story.sid}" in refused.stderr
    assert not (story.root / "live" / "home" / "PWNED.json").exists()
    _doctor_names(story, "prd.json", named)
    _repair(story)
    assert story.session.load_prd() == before, "the repair brings the task list back"
    if damage == "unknown status":  # the one restored task list resumed (the same for all)
        _resumes(story)


def test_a_torn_journal_is_named_and_closed(story: Story) -> None:
    journal = story.session.dir / "timeline" / "journal.json"
    journal.write_text('{"schema": 1, "op_id": "op-123", "plan": {"op": "rew')
    rows = _listing(story)
    assert rows[story.sid]["problem"] and "journal" in rows[story.sid]["problem"]
    refused = story.cli("checkpoints", story.sid)
    assert refused.returncode != 0
    _doctor_names(story, "journal")
    _repair(story)
    assert not journal.exists()
    listed = story.cli("checkpoints", story.sid)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    _resumes(story)


def test_damaged_event_lines_are_named_set_aside_and_blanked_in_place(story: Story) -> None:
    """A garbage line inside events.jsonl and a torn last line: readers skip them silently,
    so the doctor names them; the repair keeps their bytes and leaves every other line at
    its byte offset (the checkpoints point into the log by offset)."""
    log = story.session.events.path
    data = log.read_bytes()
    lines = data.splitlines(keepends=True)
    middle = len(lines) // 2
    start = sum(len(line) for line in lines[:middle])
    garbage = b"#" * (len(lines[middle]) - 1) + b"\n"
    log.write_bytes(data[:start] + garbage + data[start + len(garbage) :] + b'{"v": 1, "ty')
    _doctor_names(story, "events.jsonl has 2 line(s)", f"line {middle + 1}: not JSON", "torn")
    repairing = story.cli("doctor", story.sid, "--repair", "-y")
    assert repairing.returncode == 0, repairing.stdout + repairing.stderr
    assert "events.jsonl has 2 line(s)" in repairing.stdout  # the torn one too, under its lock
    assert story.cli("doctor", story.sid).returncode == 0
    repaired = log.read_bytes()
    assert repaired[:start] == data[:start]
    assert repaired[start : start + len(garbage)] == b" " * (len(garbage) - 1) + b"\n"
    kept = (story.session.dir / "events.damaged").read_bytes()
    assert garbage in kept and b'{"v": 1, "ty\n' in kept
    listed = story.cli("checkpoints", story.sid)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    _resumes(story)


@pytest.mark.parametrize(
    ("prd", "named"),
    [
        ([], "non-empty list"),
        ([{"id": "T-001"}], "missing required key(s) title"),
        ("duplicate", "duplicate task id T-001"),
        ("banana", "'banana'"),
        ("no seed test", "T-009 has no seed test"),
    ],
)
def test_run_refuses_a_task_list_it_cannot_run_before_any_model_call(
    repo: Path, sessions_dir: Path, prd: Any, named: str
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    task = {**TASKS[0], "status": "pending"}
    if prd == "duplicate":
        prd = [task, task]
    elif prd == "banana":
        prd = [{**task, "status": "banana"}]
    elif prd == "no seed test":
        prd = [task, {**task, "id": "T-009"}]
    seeded.session.prd_path.write_text(json.dumps(prd))
    with team_server(Team(recipes())) as server:
        ran = tilth("run", str(repo), env=model_env(server.base_url))
        assert server.requests == []
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert named in ran.stderr
    assert len(ran.stderr.strip().splitlines()) <= 2  # the error and its hint
