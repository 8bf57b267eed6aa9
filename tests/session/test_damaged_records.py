"""The records beside checkpoint.json and prd.json, damaged one at a time (issue #24).

``tasks/<T>.json``, ``seed-meta.json``, a ledger, a thread and ``worktree-env.json`` each
have one validator every reader uses. Each test damages one of them in a real session
(T-001 done, T-002 failed on the iteration cap; ``tests/doctor_story.py``) and drives
the real CLI: ``tilth sessions`` still lists every session, ``tilth doctor`` names the file
and what is wrong, ``--repair`` rebuilds or drops it from the record, and the session resumes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from cli.test_damaged_state import _resumes
from doctor_story import Story

from tilth.session.store import Session


@pytest.fixture
def story(saved_story: Story) -> Story:
    return saved_story.restore()


def _other_session(story: Story) -> str:
    return Session.create(story.session.dir.parent, story.repo).id


def _lists_both(story: Story, other: str) -> None:
    listed = story.cli("sessions", "--json")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert {story.sid, other} <= {row["id"] for row in json.loads(listed.stdout)}
    table = story.cli("sessions")
    assert table.returncode == 0 and story.sid in table.stdout and other in table.stdout


def _doctor_names(story: Story, key: str, *words: str) -> dict[str, Any]:
    diagnosed = story.cli("doctor", story.sid)
    assert diagnosed.returncode == 1, diagnosed.stdout + diagnosed.stderr
    for word in words:
        assert word in diagnosed.stdout, diagnosed.stdout
    rows = json.loads(story.cli("doctor", story.sid, "--json").stdout)["problems"]
    (row,) = [r for r in rows if r["problem"] == key]
    assert row["fix"], row
    return dict(row)


def _repair(story: Story) -> str:
    repaired = story.cli("doctor", story.sid, "--repair", "-y")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    healthy = story.cli("doctor", story.sid)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    return str(repaired.stdout)


def test_a_damaged_task_state_is_refused_named_and_restored(story: Story) -> None:
    other = _other_session(story)
    path = story.session.tasks_dir / "T-002.json"
    before = json.loads(path.read_text())
    path.write_text(json.dumps({**before, "stages_done": 5}))
    _lists_both(story, other)
    listed = json.loads(story.cli("sessions", "--json").stdout)
    (row,) = [r for r in listed if r["id"] == story.sid]
    assert "tasks/T-002.json: stages_done is 5" in row["problem"]
    assert "damaged: " in story.cli("sessions").stdout
    refused = story.cli("resume", story.sid)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "tasks/T-002.json: stages_done is 5" in refused.stderr
    assert f"tilth doctor {story.sid} --repair" in refused.stderr
    assert "Traceback" not in refused.stderr
    _doctor_names(story, "tasks", "tasks/T-002.json", "stages_done")
    assert "restored tasks/T-002.json from cp-" in _repair(story)
    assert isinstance(json.loads(path.read_text())["stages_done"], list)
    _resumes(story)


def test_a_task_state_of_nonsense_with_no_copy_is_removed(story: Story) -> None:
    junk = story.session.tasks_dir / "T-077.json"
    junk.write_text('{"task_id": "T-077", "turns": -3')
    _doctor_names(story, "tasks", "tasks/T-077.json", "not valid JSON")
    assert "removed tasks/T-077.json" in _repair(story)
    assert not junk.exists()


def test_a_damaged_seed_meta_is_named_and_rebuilt(story: Story) -> None:
    other = _other_session(story)
    story.session.seed_meta_path.write_text('{"tldr": 5, "blockers": "none"}')
    _lists_both(story, other)
    _doctor_names(story, "seed-meta", "seed-meta.json", "tldr is 5")
    assert "rebuilt seed-meta.json" in _repair(story)
    meta = json.loads(story.session.seed_meta_path.read_text())
    assert meta["blockers"] == [] and meta["restored_at"]
    _resumes(story)


@pytest.mark.parametrize("damage", ["garbage", "wrong types"])
def test_a_damaged_ledger_entry_is_rebuilt_from_its_verdict_event(
    story: Story, damage: str
) -> None:
    other = _other_session(story)
    path = story.session.ledger.path("T-001")
    lines = path.read_text().splitlines()
    original = json.loads(lines[0])
    lines[0] = "garbage{" if damage == "garbage" else json.dumps({**original, "verdict": 7})
    path.write_text("\n".join(lines) + "\n")
    assert len(story.session.ledger.read("T-001")) == len(lines) - 1  # readers skip it
    _lists_both(story, other)
    _doctor_names(story, "ledger", "ledger/T-001.jsonl line 1")
    assert "ledger/T-001.jsonl: 1 rebuilt, 0 dropped" in _repair(story)
    entries = story.session.ledger.read("T-001")
    assert len(entries) == len(lines)
    assert entries[0]["restored"] is True
    assert entries[0]["verdict"]["verdict"] == original["verdict"]["verdict"]
    assert entries[0]["stage"] == original["stage"]
    _resumes(story)


def test_a_damaged_thread_line_is_dropped_and_the_other_messages_keep_their_ids(
    story: Story,
) -> None:
    other = _other_session(story)
    threads = story.session.threads
    key = next(k for k in threads.keys() if k.startswith("worker.T-002"))
    before = [m.id for m in threads.get(key).read()]
    path = threads.get(key).path
    lines = path.read_text().splitlines()
    lines.insert(2, '{"v": 1, "id": "someone-else#9", "message": {"role": "user"}}')
    lines.insert(1, "[[[")
    path.write_text("\n".join(lines) + "\n")
    _lists_both(story, other)
    _doctor_names(story, "thread", f"threads/{key}.jsonl line 2", "belongs to another thread")
    assert f"threads/{key}.jsonl: dropped 2 line(s)" in _repair(story)
    assert [m.id for m in threads.get(key).read()] == before
    assert len(path.read_text().splitlines()) == len(before)
    _resumes(story)


def test_a_damaged_worktree_env_record_trusts_nothing_and_is_recorded_again(
    story: Story,
) -> None:
    other = _other_session(story)
    record = story.session.dir / "worktree-env.json"
    record.write_text('{"schema": 1, "trusted": ".venv"}')
    _lists_both(story, other)
    _doctor_names(story, "worktree-env", "worktree-env.json", "trusted is '.venv'")
    assert "recorded the worktree's environment again" in _repair(story)
    # Worker tools have run in the worktree: nothing in it can be trusted any more.
    assert json.loads(record.read_text())["trusted"] == []
    _resumes(story)
