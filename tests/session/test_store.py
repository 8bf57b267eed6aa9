"""Session store: ids, layout, checkpoint.json and its atomic writes."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tilth.errors import ConfigError, SessionCorrupt, SessionNotFound, UsageError
from tilth.session.session_record import SessionRecord
from tilth.session.store import CHECKPOINT_SCHEMA, STATUSES, Session, is_session_id, new_session_id

ID_RE = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{6}$")


def test_id_format_is_utc_timestamp_plus_hex() -> None:
    sid = new_session_id(datetime(2026, 5, 26, 9, 14, 45, tzinfo=UTC))
    assert ID_RE.match(sid)
    assert sid.startswith("20260526-091445-")
    assert is_session_id(sid)


def test_created_id_uses_utc(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "sessions", tmp_path)
    assert ID_RE.match(session.id)
    stamp = datetime.strptime(session.id[:15], "%Y%m%d-%H%M%S").replace(tzinfo=UTC)
    assert abs(datetime.now(UTC) - stamp) < timedelta(minutes=5)


def test_ids_sort_chronologically() -> None:
    start = datetime(2025, 12, 31, 23, 59, 58, tzinfo=UTC)
    times = [start + timedelta(seconds=s) for s in (0, 1, 2, 61, 3600, 86400 * 40, 86400 * 400)]
    ids = [new_session_id(t) for t in times]
    assert sorted(ids) == ids


def test_sessions_created_in_one_second_still_sort_in_creation_order(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    ids = [Session.create(sessions, tmp_path).id for _ in range(30)]
    assert len(set(ids)) == 30
    assert sorted(ids) == ids


@pytest.mark.parametrize(
    "text",
    [
        "",
        "20260526-091445",
        "20260526-091445-ABCDEF",
        "2026052-091445-abcdef",
        "x-y-z",
        "20260526-091445-abcdefg",
        "2026o526-091445-abcdef",
    ],
)
def test_is_session_id_rejects_other_names(text: str) -> None:
    assert not is_session_id(text)


def test_layout_and_initial_checkpoint(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    session = Session.create(sessions, tmp_path / "repo", parent_session="x")
    assert session.dir == sessions / session.id
    assert (session.dir / "events.jsonl").read_bytes() == b""
    assert session.checkpoint_path == session.dir / "checkpoint.json"
    assert session.prd_path.name == "prd.json"
    assert session.seed_meta_path.name == "seed-meta.json"
    assert session.progress_path.name == "progress.txt"
    assert session.summary_path.name == "summary.json"
    assert session.chat_html_path.name == "chat.html"
    assert session.learnings_path.name == "proposed-learnings.md"
    assert session.workspace_dir == session.dir / "workspace"
    assert session.branch == f"session/{session.id}"
    assert session.ledger.directory == session.dir / "ledger"
    assert session.threads.directory == session.dir / "threads"
    on_disk = json.loads(session.checkpoint_path.read_text())
    assert on_disk["schema"] == CHECKPOINT_SCHEMA
    assert on_disk["session_id"] == session.id
    assert on_disk["source"] == str(tmp_path / "repo")
    assert on_disk["status"] == "running"
    assert on_disk["tokens_used"] == 0
    assert on_disk["workspace"] is None and on_disk["branch"] is None
    assert on_disk["parent_session"] == "x"
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$", on_disk["started_at"])


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "s", tmp_path)
    session.update_checkpoint(
        workspace=str(session.workspace_dir), branch=session.branch, extra={"nested": [1, "é"]}
    )
    session.set_status("prepared")
    assert session.add_tokens(150) == 150
    assert session.add_tokens(-20) == 150  # negative usage never lowers the total
    reopened = Session.open(tmp_path / "s", session.id)
    cp = reopened.record().to_dict()
    assert cp["schema"] == CHECKPOINT_SCHEMA
    assert cp["workspace"] == str(session.workspace_dir)
    assert cp["branch"] == session.branch
    assert cp["extra"] == {"nested": [1, "é"]}
    assert reopened.status == "prepared"
    assert reopened.tokens_used == 150
    assert reopened.source == tmp_path


def test_every_status_is_accepted_and_others_refused(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "s", tmp_path)
    for status in STATUSES:
        session.set_status(status)  # type: ignore[arg-type]
        assert session.status == status
    with pytest.raises(ValueError):
        session.set_status("paused")  # type: ignore[arg-type]
    assert session.status == STATUSES[-1]


def test_open_unknown_and_malformed_ids(tmp_path: Path) -> None:
    with pytest.raises(SessionNotFound) as info:
        Session.open(tmp_path, "20260101-000000-abcdef")
    assert "20260101-000000-abcdef" in str(info.value)
    (tmp_path / "notes").mkdir()
    for bad in ("", "..", "a/b", "notes", "20260101-000000-abcdef/..", " 20260101-000000-abcdef"):
        with pytest.raises(UsageError):
            Session.open(tmp_path, bad)


def test_corrupt_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "s", tmp_path)
    session.checkpoint_path.write_text('{"session_id": ')
    with pytest.raises(SessionCorrupt) as info:
        session.record()
    assert "checkpoint.json" in str(info.value) and "not valid JSON" in str(info.value)
    session.checkpoint_path.write_text("[1, 2]")
    with pytest.raises(SessionCorrupt, match="not a JSON object"):
        session.record()
    session.checkpoint_path.unlink()
    with pytest.raises(SessionCorrupt, match=r"no checkpoint\.json"):
        session.record()


def test_prd_round_trip_and_errors(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "s", tmp_path)
    with pytest.raises(SessionCorrupt, match="never seeded"):
        session.load_prd()
    tasks = [
        {
            "id": "T-001",
            "title": "t",
            "description": "d",
            "acceptance_criteria": ["a"],
            "status": "pending",
        }
    ]
    session.save_prd(tasks)
    assert session.load_prd() == tasks
    session.prd_path.write_text('{"not": "a list"}')
    with pytest.raises(SessionCorrupt, match="not a JSON list"):
        session.load_prd()


def test_seed_meta_is_empty_when_missing_or_bad(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "s", tmp_path)
    assert session.seed_meta() == {}
    session.seed_meta_path.write_text("garbage")
    assert session.seed_meta() == {}
    session.seed_meta_path.write_text('{"tldr": "x"}')
    assert session.seed_meta() == {"tldr": "x"}


def test_state_writes_leave_no_temp_files(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "s", tmp_path)
    for n in range(20):
        session.add_tokens(n)
        session.save_prd([])
    names = sorted(p.name for p in session.dir.iterdir())
    assert names == ["checkpoint.json", "events.jsonl", "prd.json"]


def test_log_and_last_stop(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "s", tmp_path)
    assert session.last_stop() is None
    session.log("stop", reason="token_cap")
    session.log("session_resume", plan=[])
    session.log("stop", reason="all_done")
    assert session.last_stop() == "all_done"
    assert [e.seq for e in session.events.events()] == [1, 2, 3]


def test_sessions_dir_that_is_a_file_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "sessions"
    blocker.write_text("not a directory")
    with pytest.raises(ConfigError) as info:
        Session.create(blocker, tmp_path)
    assert str(blocker) in str(info.value) and info.value.exit_code == 2


def test_the_session_record_is_typed_and_writes_back_what_the_file_holds(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "s", tmp_path, parent_session="x")
    session.update_checkpoint(tokens_used=7, attempt={"number": 2})
    record = session.record()
    assert isinstance(record, SessionRecord)
    assert (record.session_id, record.source, record.status) == (
        session.id,
        str(tmp_path),
        "running",
    )
    assert (record.tokens_used, record.kind, record.workspace) == (7, "run", None)
    assert record.extra == {"parent_session": "x", "attempt": {"number": 2}}
    with pytest.raises(TypeError):
        record.extra["attempt"] = {}  # type: ignore[index]
    assert record.to_dict() == json.loads(session.checkpoint_path.read_text())
    # A key the file lacks is not invented on the way back out.
    session.checkpoint_path.write_text(json.dumps({"session_id": session.id, "schema": 2}))
    bare = session.record()
    assert (bare.status, bare.tokens_used, bare.kind) == ("running", 0, "run")
    assert bare.to_dict() == {"session_id": session.id, "schema": 2}


def test_the_old_checkpoint_reader_still_answers_and_says_it_is_deprecated(
    tmp_path: Path,
) -> None:
    session = Session.create(tmp_path / "s", tmp_path)
    with pytest.warns(DeprecationWarning, match=r"Session\.record\(\)"):
        data = session.checkpoint()
    assert data == session.record().to_dict()
