"""Finding sessions: listing, latest overall, latest for a workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilth.errors import SessionNotFound
from tilth.session.discovery import (
    describe,
    list_sessions,
    resolve_session,
    session_ids,
    sessions_for,
)
from tilth.session.store import Session


def test_listing_empty_and_missing_dirs(tmp_path: Path) -> None:
    assert session_ids(tmp_path / "nope") == []
    with pytest.raises(SessionNotFound) as info:
        resolve_session(tmp_path / "nope", None)
    assert "no sessions" in str(info.value)


def test_session_ids_ignore_other_entries(tmp_path: Path) -> None:
    a = Session.create(tmp_path, tmp_path)
    (tmp_path / "notes").mkdir()
    (tmp_path / "20260101-000000-abcdef.txt").write_text("x")
    assert session_ids(tmp_path) == [a.id]


def test_latest_overall_and_for_a_workspace(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    repo_a, repo_b = tmp_path / "a", tmp_path / "b"
    repo_a.mkdir()
    repo_b.mkdir()
    a1 = Session.create(sessions, repo_a)
    b1 = Session.create(sessions, repo_b)
    a2 = Session.create(sessions, repo_a)
    b2 = Session.create(sessions, repo_b)
    assert resolve_session(sessions, None).id == b2.id
    assert resolve_session(sessions, None, source=repo_a).id == a2.id
    assert resolve_session(sessions, None, source=repo_b).id == b2.id
    assert resolve_session(sessions, a1.id).id == a1.id
    assert [s.id for s in sessions_for(sessions, repo_a)] == [a1.id, a2.id]
    # An unresolved spelling of the same workspace matches too.
    assert [s.id for s in sessions_for(sessions, repo_b / ".." / "b")] == [b1.id, b2.id]


def test_latest_for_a_workspace_without_sessions_is_not_another_repos(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    Session.create(sessions, tmp_path / "a")
    with pytest.raises(SessionNotFound) as info:
        resolve_session(sessions, None, source=tmp_path / "other")
    assert str(tmp_path / "other") in str(info.value)


def test_sessions_for_filters_by_status(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    first = Session.create(sessions, tmp_path)
    second = Session.create(sessions, tmp_path)
    first.set_status("prepared")
    assert [s.id for s in sessions_for(sessions, tmp_path, ("prepared",))] == [first.id]
    assert [s.id for s in sessions_for(sessions, tmp_path, ("running",))] == [second.id]


def test_describe_counts_tasks_and_last_stop(tmp_path: Path) -> None:
    session = Session.create(tmp_path, tmp_path / "repo", parent_session="20260101-000000-aaaaaa")
    info = describe(session)
    assert (info.status, info.tasks_done, info.tasks_total, info.last_stop) == (
        "running",
        0,
        0,
        None,
    )
    session.save_prd([{"id": "T-001", "status": "done"}, {"id": "T-002", "status": "pending"}])
    session.log("stop", reason="iter_cap")
    session.set_status("failed")
    info = describe(session)
    assert info.as_dict() == {
        "id": session.id,
        "source": str(tmp_path / "repo"),
        "status": "failed",
        "state": "failed",
        "tasks_done": 1,
        "tasks_total": 2,
        "last_stop": "iter_cap",
        "parent": "20260101-000000-aaaaaa",
        "problem": None,
        "kind": "run",
    }


def test_a_damaged_session_is_listed_not_fatal(tmp_path: Path) -> None:
    good = Session.create(tmp_path, tmp_path)
    bad = Session.create(tmp_path, tmp_path)
    bad.checkpoint_path.write_text("{")
    rows = {r.id: r for r in list_sessions(tmp_path)}
    assert rows[good.id].problem is None
    assert rows[bad.id].status == "unreadable"
    assert rows[bad.id].problem and "checkpoint.json" in rows[bad.id].problem


def test_state_tells_a_live_owner_from_a_clean_stop_and_a_killed_one(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tilth.session.discovery import state_of

    session = Session.create(tmp_path, tmp_path / "repo")
    with session.lock():
        assert state_of(session) == "running", "this process holds it: a live owner"
    assert state_of(session) == "stopped", "let go cleanly (Ctrl-C, a cap): resumable"
    # kill -9 leaves the owner's pid behind; the process is gone.
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    (session.dir / ".lock.pid").write_text(dead.stdout.strip())
    assert state_of(session) == "interrupted"
    assert describe(session).as_dict()["state"] == "interrupted"
    assert describe(session).as_dict()["status"] == "running", "the record is left as it is"
    session.set_status("prepared")
    assert state_of(session) == "prepared"


def test_a_recorded_stop_held_by_a_live_process_is_running(tmp_path: Path) -> None:
    """A resume sets out from ``failed`` (environment check, recovery, plan) before it
    records ``running``: listings must not say ``failed`` meanwhile."""
    from tests.lock_holder import held_elsewhere
    from tilth.session.discovery import state_of

    session = Session.create(tmp_path, tmp_path / "repo")
    session.set_status("failed")
    with held_elsewhere(session):
        assert state_of(session) == "running"
        assert describe(session).as_dict()["state"] == "running"
    assert state_of(session) == "failed"
