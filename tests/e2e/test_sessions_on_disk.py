"""SPEC §4 from outside: ids, layout, checkpoint.json, the event log and statuses."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from tests.e2e.lab import Live, git, prep_that_never_finishes

ID_RE = re.compile(r"^(\d{8}-\d{6})-[0-9a-f]{6}$")

MUST_EVENTS = [
    "session_start",
    "session_prepared",
    "seed_committed",
    "model_call",
    "tool_call",
    "tool_result",
    "evaluator_verdict",
    "task_done",
    "commit",
    "stage_completed",
    "stop",
]
STOP_REASONS = {
    "all_done",
    "wall_clock",
    "token_cap",
    "iter_cap",
    "evaluator_cap",
    "empty_responses",
    "no_case",
    "interrupted",
    "error",
}


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_session_id_is_utc_timestamp_plus_six_hex(done: Live) -> None:
    match = ID_RE.match(done.sid)
    assert match, done.sid
    stamp = datetime.strptime(match.group(1), "%Y%m%d-%H%M%S").replace(tzinfo=UTC)
    started = _ts(done.record().started_at)
    # the id is the creation time in UTC (not local time): within a minute of started_at
    assert abs((started - stamp).total_seconds()) < 60


def test_layout_files_exist(done: Live) -> None:
    sdir = done.sdir()
    for name in (
        "checkpoint.json",
        "events.jsonl",
        "prd.json",
        "seed-meta.json",
        "progress.txt",
        "summary.json",
        "chat.html",
    ):
        assert (sdir / name).is_file(), name
    assert sorted(p.name for p in (sdir / "ledger").iterdir()) == ["T-001.jsonl", "T-002.jsonl"]
    ledger = [
        json.loads(line) for line in (sdir / "ledger" / "T-001.jsonl").read_text().splitlines()
    ]
    # one line per verdict, in order: the rejection, then the acceptance
    assert [entry["verdict"]["verdict"] for entry in ledger] == ["reject", "accept"]
    progress = (sdir / "progress.txt").read_text().splitlines()
    assert len(progress) == 2 and "T-001" in progress[0] and "T-002" in progress[1]
    worktree = done.worktree()
    branch = git(worktree, "rev-parse", "--abbrev-ref", "HEAD").strip()
    assert branch == f"session/{done.sid}"
    # it is a worktree of the source repo, not a clone
    common = git(worktree, "rev-parse", "--git-common-dir").strip()
    assert (worktree / common).resolve() == (done.proj / ".git").resolve()


def test_checkpoint_json_fields(done: Live) -> None:
    cp = done.record().to_dict()
    assert cp["session_id"] == done.sid
    assert cp["source"] == str(done.proj)
    assert cp["workspace"] == str(done.worktree())
    assert cp["branch"] == f"session/{done.sid}"
    assert cp["status"] == "all_done"
    total = sum(e["payload"].get("tokens_used", 0) for e in done.of_type("session_prepared"))
    assert isinstance(cp["tokens_used"], int) and cp["tokens_used"] > total > 0
    _ts(cp["started_at"])


def test_prd_and_seed_meta_fields(done: Live) -> None:
    for task in done.prd():
        assert {"id", "title", "description", "acceptance_criteria", "status"} <= set(task)
        assert re.match(r"^T-\d{3,}$", task["id"])
    meta = json.loads((done.sdir() / "seed-meta.json").read_text())
    for key in (
        "interviewer_model",
        "started_at",
        "ended_at",
        "tokens",
        "tldr",
        "open_questions",
        "blockers",
        "scope_notes",
    ):
        assert key in meta, key


def test_every_event_line_is_ts_type_payload(done: Live) -> None:
    lines = (done.sdir() / "events.jsonl").read_text().splitlines()
    assert lines
    for line in lines:
        record = json.loads(line)
        assert isinstance(record["type"], str) and record["type"]
        assert isinstance(record["payload"], dict)
        _ts(record["ts"])


def test_must_events_after_prep_and_run(done: Live) -> None:
    types = done.types()
    missing = [kind for kind in MUST_EVENTS if kind not in types]
    assert missing == []
    # the session, its worktree and branch come first, before the interview's first call
    start = done.events()[0]
    assert start["type"] == "session_start"
    assert start["payload"]["branch"] == f"session/{done.sid}"
    assert start["payload"]["worktree"] == str(done.worktree())
    assert types.index("session_start") < types.index("model_call")
    prepared = done.of_type("session_prepared")[0]["payload"]
    meta = json.loads((done.sdir() / "seed-meta.json").read_text())
    assert prepared["tokens_used"] == meta["tokens"]["total"] > 0
    seed = done.of_type("seed_committed")[0]["payload"]
    assert seed["branch"] == f"session/{done.sid}"
    assert git(done.worktree(), "log", "-1", "--format=%s", seed["sha"]).startswith("seed: ")
    assert types.index("session_prepared") < types.index("seed_committed")
    stop = done.of_type("stop")[-1]["payload"]
    assert stop["reason"] == "all_done"
    assert types[-1] == "stop" or "stop" in types[-3:]


def test_failed_run_logs_task_failed_with_reason(failed: Live) -> None:
    failures = failed.of_type("task_failed")
    assert [f["payload"]["task_id"] for f in failures] == ["T-001"]
    assert failures[0]["payload"]["reason"] == "iter_cap"
    stop = failed.of_type("stop")[-1]["payload"]
    assert stop["reason"] in STOP_REASONS and stop["reason"] == "iter_cap"
    assert failed.record().status == "failed"
    assert failed.statuses() == {"T-001": "failed", "T-002": "pending"}


def test_statuses_prepared_and_running(prepared: Live) -> None:
    assert prepared.record().status == "prepared"
    assert set(prepared.statuses().values()) == {"pending"}
    # a run stopped by the wall clock is left `running` (resumable)
    done = prepared.cli("run", str(prepared.proj), TILTH_MAX_WALL_CLOCK_MINUTES="0.0000001")
    assert done.returncode == 3, done.stdout + done.stderr
    assert prepared.record().status == "running"
    assert prepared.of_type("stop")[-1]["payload"]["reason"] == "wall_clock"


@pytest.mark.parametrize("verb", ["sessions", "checkpoints", "visualize"])
def test_readers_tolerate_a_torn_last_line(done: Live, verb: str) -> None:
    log = done.sdir() / "events.jsonl"
    with log.open("a") as handle:
        handle.write('{"v": 1, "seq": 99999, "ts": "2026-01-0')
    args = {"sessions": ["sessions"], "checkpoints": ["checkpoints", done.sid]}.get(
        verb, [verb, done.sid]
    )
    result = done.cli(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert done.sid in result.stdout or verb != "sessions"


def test_resume_tolerates_a_torn_last_line(failed: Live) -> None:
    log = failed.sdir() / "events.jsonl"
    with log.open("a") as handle:
        handle.write('{"v": 1, "seq": 99999, "ts": "2026-01-0')
    result = failed.cli("resume", failed.sid, TILTH_MAX_WALL_CLOCK_MINUTES="0.0000001")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert failed.of_type("session_resume")
    # the torn fragment did not glue itself to the next event
    for line in log.read_text().splitlines()[:-1]:
        if line.startswith('{"v": 1, "seq": 99999'):
            continue
        json.loads(line)


def test_readers_tolerate_torn_ledger_and_thread_lines(done: Live) -> None:
    for rel in ("ledger/T-001.jsonl", "threads/worker.T-001.implementing.jsonl"):
        path = done.sdir() / rel
        assert path.is_file(), rel
        with path.open("a") as handle:
            handle.write('{"v": 1, "ts": "2026-0')
    for args in (("visualize", done.sid), ("checkpoints", done.sid), ("sessions",)):
        result = done.cli(*args)
        assert result.returncode == 0, (args, result.stdout + result.stderr)
        assert "Traceback" not in result.stderr
    back = done.cli("rewind", done.sid, "--to", "T-002", "-y")
    assert back.returncode == 0, back.stdout + back.stderr


def test_sessions_dir_setting_moves_the_sessions(done: Live) -> None:
    elsewhere = done.live / "other-home"
    elsewhere.mkdir()
    listed = done.cli(
        "sessions", "--json", TILTH_HOME=str(elsewhere), TILTH_SESSIONS_DIR=str(done.sessions)
    )
    assert listed.returncode == 0, listed.stderr
    assert [row["id"] for row in json.loads(listed.stdout)] == [done.sid]
    empty = done.cli("sessions", "--json", TILTH_HOME=str(elsewhere))
    assert empty.returncode == 0 and done.sid not in empty.stdout


def test_latest_session_is_the_newest(done: Live) -> None:
    forked = done.cli("fork", done.sid, "--at", "T-002", "--json")
    assert forked.returncode == 0, forked.stderr
    child = json.loads(forked.stdout)["session_id"]
    assert sorted([done.sid, child])[-1] == child  # ids sort chronologically
    rows = json.loads(done.cli("sessions", "--json").stdout)
    assert {row["id"]: row.get("parent") for row in rows}[child] == done.sid
    latest = done.cli("checkpoints", "--json")
    assert latest.returncode == 0, latest.stderr
    assert child in latest.stdout + latest.stderr


def test_no_temporary_files_are_left_behind(done: Live) -> None:
    sdir = done.sdir()
    leftovers = [
        str(p.relative_to(sdir))
        for p in sdir.rglob("*")
        if not p.relative_to(sdir).as_posix().startswith("workspace/")
        and (p.name.endswith((".tmp", "~")) or ".tmp." in p.name)
    ]
    assert leftovers == []


def test_readers_handle_a_session_whose_prep_never_finished(blank: Live) -> None:
    sid = prep_that_never_finishes(blank)
    for args in (("sessions",), ("checkpoints", sid), ("visualize", sid)):
        result = blank.cli(*args)
        text = result.stdout + result.stderr
        assert "Traceback" not in text, args
        assert result.returncode == 0 or result.stderr.startswith("error:"), (args, text)
    listed = blank.cli("sessions", "--json")
    assert listed.returncode == 0
    assert [row["id"] for row in json.loads(listed.stdout)] == [sid]
