"""SPEC §7 from outside: checkpoints, rewind (scopes, dry run), reset to seed, fork, summarize.

The oracle for "equal to what it was at checkpoint X" is the original session's own
event log: X's instant is the last event before it, so HEAD, task statuses, the
token count and the kept log are all read off the events recorded up to there.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.e2e.lab import (
    BASH_FILE,
    BASH_MADE,
    TINY_CLOCK,
    Live,
    dir_digest,
    git,
    read_jsonl,
)
from tilth.demo.story import WORD_COUNT_FIRST


def _at_task_start(events: list[dict[str, Any]], task_id: str) -> int:
    return next(
        i
        for i, e in enumerate(events)
        if e["type"] == "task_start" and e["payload"].get("task_id") == task_id
    )


def _without_go_back_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kinds = ("rewind", "restart", "fork", "reset_to_seed", "session_resume")
    while events and events[-1]["type"] in kinds:
        events = events[:-1]
    return events


def _tokens_at(events: list[dict[str, Any]]) -> int:
    calls = [e for e in events if e["type"] == "model_call"]
    return int(calls[-1]["payload"]["tokens_used_total"])


def _statuses_at(events: list[dict[str, Any]], task_ids: list[str]) -> dict[str, str]:
    out = {tid: "pending" for tid in task_ids}
    for e in events:
        tid = e["payload"].get("task_id")
        if e["type"] == "task_start":
            out[tid] = "in_progress"
        elif e["type"] == "task_done":
            out[tid] = "done"
        elif e["type"] == "task_failed":
            out[tid] = "failed"
    return out


def _planning_sha(live: Live) -> str:
    """T-001's planning commit (the first stage of the run)."""
    first = live.of_type("stage_completed")[0]["payload"]
    assert (first["task_id"], first["stage"]) == ("T-001", "planning")
    return str(first["sha"])


def test_checkpoints_list_seed_task_starts_stages_and_turns(done: Live) -> None:
    rows = done.checkpoints()
    kinds = [r["kind"] for r in rows]
    assert kinds[0] == "seed"
    assert [r["task_id"] for r in rows if r["kind"] == "task_start"] == ["T-001", "T-002"]
    stages = [(r["task_id"], r["stage"]) for r in rows if r["kind"] == "stage"]
    completed = [
        (e["payload"]["task_id"], e["payload"]["stage"]) for e in done.of_type("stage_completed")
    ]
    assert stages == completed
    assert kinds.count("turn") >= 10
    for row in rows:
        assert {"id", "ts", "kind", "task_id", "stage", "turn", "label", "files_changed"} <= set(
            row
        )
    assert len({r["id"] for r in rows}) == len(rows)
    table = done.cli("checkpoints", done.sid)
    assert table.returncode == 0
    assert all(r["id"] in table.stdout for r in rows)


def test_rewind_both_makes_everything_as_it_was_at_the_checkpoint(done: Live) -> None:
    original = done.events()
    at = _at_task_start(original, "T-002")
    t001_commit = done.of_type("commit")[0]["payload"]["sha"]
    result = done.cli("rewind", done.sid, "--to", "T-002", "--scope", "both", "-y")
    assert result.returncode == 0, result.stdout + result.stderr
    assert done.head() == t001_commit
    assert done.porcelain() == ""
    assert not (done.worktree() / "textutils" / "slug.py").exists()
    kept = _without_go_back_events(done.events())
    # the log is the original up to X: it ends at T-002's start (or just before it)
    assert kept == original[: len(kept)]
    assert len(kept) in (at, at + 1), (len(kept), at)
    assert done.statuses() == _statuses_at(kept, ["T-001", "T-002"])
    assert done.statuses()["T-001"] == "done"
    assert done.record().tokens_used == _tokens_at(kept)
    assert done.of_type("rewind"), "a rewind leaves one event"


def test_rewind_dry_run_changes_nothing(done: Live) -> None:
    before = (dir_digest(done.sdir()), done.head(), done.porcelain())
    result = done.cli("rewind", done.sid, "--to", "T-001/planning", "--scope", "both", "--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
    text = result.stdout.lower()
    assert "commit" in text and "event" in text
    assert "textutils/count.py" in result.stdout
    after = (dir_digest(done.sdir()), done.head(), done.porcelain())
    assert after == before


def test_rewind_code_scope_restores_files_only(done: Live) -> None:
    events_before = len(done.events())
    statuses = done.statuses()
    planning = _planning_sha(done)
    result = done.cli("rewind", done.sid, "--to", "T-001/planning", "--scope", "code", "-y")
    assert result.returncode == 0, result.stdout + result.stderr
    assert git(done.worktree(), "diff", "--stat", planning).strip() == ""
    assert not (done.worktree() / "textutils" / "count.py").exists()
    # No done task without its code: both tasks' later stage commits were dropped.
    assert statuses == {"T-001": "done", "T-002": "done"}
    assert done.statuses() == {"T-001": "in_progress", "T-002": "pending"}
    assert "T-002: the commits of" in result.stdout
    assert len(done.events()) >= events_before  # the log is kept


def test_rewind_conversation_scope_keeps_the_files(done: Live) -> None:
    original = done.events()
    head = done.head()
    tree = git(done.worktree(), "ls-files", "-s")
    result = done.cli("rewind", done.sid, "--to", "T-002", "--scope", "conversation", "-y")
    assert result.returncode == 0, result.stdout + result.stderr
    assert git(done.worktree(), "ls-files", "-s") == tree
    assert (done.worktree() / "textutils" / "slug.py").exists()
    assert done.head() == head
    kept = _without_go_back_events(done.events())
    assert kept == original[: len(kept)]
    at = _at_task_start(original, "T-002")
    assert len(kept) in (at, at + 1)
    assert done.statuses()["T-002"] != "done"


def test_every_go_back_verb_leaves_one_record(done: Live) -> None:
    sid = done.sid
    assert done.cli("rewind", sid, "--to", "T-002/planning", "-y").returncode == 0
    assert len(done.of_type("rewind")) == 1
    assert done.cli("restart", sid, "T-002", "-y").returncode == 0
    assert len(done.of_type("restart")) == 1
    forked = done.cli("fork", sid, "--at", "T-001", "--json")
    assert forked.returncode == 0, forked.stderr
    child = json.loads(forked.stdout)["session_id"]
    assert len(done.of_type("fork", child)) == 1
    ops = read_jsonl(done.sdir(sid) / "timeline" / "operations.jsonl")
    assert [o["kind"] for o in ops] == ["rewind", "restart", "fork"]
    assert done.cli("reset", "--to-seed", sid, "-y").returncode == 0
    # The reset erases the run, its go-backs included; it records only itself.
    ops = read_jsonl(done.sdir(sid) / "timeline" / "operations.jsonl")
    assert [o["kind"] for o in ops] == ["reset_to_seed"]


def test_fork_creates_a_session_equal_to_the_checkpoint(done: Live) -> None:
    sid = done.sid
    original = done.events()
    before = (dir_digest(done.sdir(), skip=(".lock", "operations.jsonl")), done.head())
    porcelain = done.porcelain()
    forked = done.cli("fork", sid, "--at", "T-002", "--json")
    assert forked.returncode == 0, forked.stdout + forked.stderr
    child = json.loads(forked.stdout)["session_id"]
    assert child != sid and child in done.session_ids()
    cp = done.checkpoint(child)
    assert cp["branch"] == f"session/{child}"
    assert cp["workspace"] == str(done.worktree(child))
    t001_commit = done.of_type("commit", sid)[0]["payload"]["sha"]
    assert done.head(child) == t001_commit
    assert done.porcelain(child) == ""
    kept = _without_go_back_events(done.events(child))
    at = _at_task_start(original, "T-002")
    assert [e["type"] for e in kept] == [e["type"] for e in original[: len(kept)]]
    assert len(kept) in (at, at + 1)
    assert done.statuses(child) == _statuses_at(kept, ["T-001", "T-002"])
    # its conversation is the one at X: T-001's threads, nothing of T-002
    threads = sorted(p.name for p in (done.sdir(child) / "threads").glob("*.jsonl"))
    assert "worker.T-001.implementing.jsonl" in threads
    assert not [name for name in threads if "T-002" in name], threads
    # the original is untouched
    after = (dir_digest(done.sdir(), skip=(".lock", "operations.jsonl")), done.head())
    assert after == before and done.porcelain() == porcelain
    # and the fork can go on
    go_on = done.cli("resume", child, TILTH_MAX_WALL_CLOCK_MINUTES=TINY_CLOCK)
    assert go_on.returncode == 3, go_on.stdout + go_on.stderr


def test_summarize_then_rewind_still_works(done: Live) -> None:
    rows = done.checkpoints()
    turns = [
        r
        for r in rows
        if r["kind"] == "turn" and r["task_id"] == "T-001" and r["stage"] == "implementing"
    ]
    assert len(turns) >= 2
    result = done.cli(
        "summarize",
        done.sid,
        "--at",
        turns[-1]["id"],
        "--direction",
        "up-to",
        "--thread",
        "worker.T-001.implementing",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    thread = (done.sdir() / "threads" / "worker.T-001.implementing.jsonl").read_text()
    assert "(scripted) summary:" in thread
    planning = _planning_sha(done)
    back = done.cli("rewind", done.sid, "--to", "T-001/planning", "-y")
    assert back.returncode == 0, back.stdout + back.stderr
    assert done.head() == planning
    assert done.statuses()["T-001"] == "in_progress"


def _threads_text(live: Live) -> str:
    return "".join(p.read_text() for p in sorted((live.sdir() / "threads").glob("*.jsonl")))


def test_rewind_code_scope_leaves_the_conversation_a_note(done: Live) -> None:
    before = _threads_text(done)
    result = done.cli("rewind", done.sid, "--to", "T-002/planning", "--scope", "code", "-y")
    assert result.returncode == 0, result.stdout + result.stderr
    after = _threads_text(done)
    note = "The files in the worktree were restored to checkpoint"
    assert note not in before
    assert note in after, after[-500:]


def test_rewind_dry_run_lists_files_the_user_edited_as_conflicts(done: Live) -> None:
    edited = done.worktree() / "textutils" / "slug.py"
    edited.write_text(edited.read_text() + "# the user's own line\n")
    before = (dir_digest(done.sdir()), done.head(), done.porcelain())
    result = done.cli("rewind", done.sid, "--to", "T-002", "--scope", "both", "--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    header = next(
        i
        for i, line in enumerate(lines)
        if re.search(r"conflict|edited since|you changed", line, re.IGNORECASE)
    )
    assert "textutils/slug.py" in "\n".join(lines[header : header + 3]), result.stdout
    assert (dir_digest(done.sdir()), done.head(), done.porcelain()) == before


def test_resume_after_a_rewind_continues_from_the_checkpoint(done: Live) -> None:
    seed = done.seed_sha()
    subjects = done.subjects(seed)
    back = done.cli("rewind", done.sid, "--to", "T-002/implementing", "--scope", "both", "-y")
    assert back.returncode == 0, back.stdout + back.stderr
    assert done.subjects(seed) == subjects[:-2]
    resumed = done.cli("resume", done.sid)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    # only the stages after the checkpoint ran again
    assert done.subjects(seed) == subjects
    started = [
        e["payload"]["stage"]
        for e in done.of_type("stage_started")
        if e["payload"]["task_id"] == "T-002"
    ]
    assert started[-2:] == ["code_review", "verifying"]
    assert started.count("planning") == 1
    assert done.record().status == "all_done"


def test_go_back_verbs_touch_no_user_ref(done: Live) -> None:
    main = git(done.proj, "rev-parse", "main")
    sid = done.sid
    for args in (
        ("rewind", sid, "--to", "T-002/planning", "-y"),
        ("rewind", sid, "--to", "T-001/implementing", "--scope", "code", "-y"),
        ("fork", sid, "--at", "T-001/planning"),
        ("reset", "--to-seed", sid, "-y"),
    ):
        result = done.cli(*args)
        assert result.returncode == 0, (args, result.stdout + result.stderr)
    refs = git(done.proj, "for-each-ref", "--format=%(refname)").split()
    sessions = {f"refs/heads/session/{s}" for s in done.session_ids()}
    assert set(refs) == {"refs/heads/main", *sessions}
    assert git(done.proj, "rev-parse", "main") == main
    assert git(done.proj, "status", "--porcelain") == ""


def _first_write_turn(live: Live) -> dict[str, Any]:
    """The turn checkpoint right after T-001's first implementing turn (write + bash probes)."""
    return next(
        r
        for r in live.checkpoints()
        if r["kind"] == "turn" and r["task_id"] == "T-001" and r["stage"] == "implementing"
    )


def test_rewind_to_a_turn_restores_files_written_by_tools_and_by_bash(done: Live) -> None:
    turn = _first_write_turn(done)
    assert "textutils/count.py" in turn["files_changed"]
    result = done.cli("rewind", done.sid, "--to", turn["id"], "--scope", "both", "-y")
    assert result.returncode == 0, result.stdout + result.stderr
    assert done.head() == _planning_sha(done)
    worktree = done.worktree()
    assert (worktree / "textutils" / "count.py").read_text() == WORD_COUNT_FIRST
    assert (worktree / BASH_FILE).read_text().strip() == BASH_MADE
    assert done.statuses()["T-001"] == "in_progress"


def test_fork_at_a_turn_carries_the_uncommitted_files(done: Live) -> None:
    turn = _first_write_turn(done)
    forked = done.cli("fork", done.sid, "--at", turn["id"], "--json")
    assert forked.returncode == 0, forked.stdout + forked.stderr
    child = json.loads(forked.stdout)["session_id"]
    worktree = done.worktree(child)
    assert done.head(child) == _planning_sha(done)
    assert (worktree / "textutils" / "count.py").read_text() == WORD_COUNT_FIRST
    assert (worktree / BASH_FILE).read_text().strip() == BASH_MADE


def test_checkpoints_record_what_they_could_not_capture(done: Live) -> None:
    rows = done.checkpoints()
    bash_turns = [r for r in rows if r["kind"] == "turn" and "bash" in r["label"]]
    assert bash_turns
    for row in bash_turns:
        assert any("outside" in gap or "side effect" in gap for gap in row["gaps"]), row


def test_rewind_without_to_off_a_terminal_is_a_clear_error(done: Live) -> None:
    head = done.head()
    result = done.cli("rewind", done.sid, "-y")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--to" in result.stderr and "Traceback" not in result.stderr
    assert done.head() == head


def test_rewind_to_an_unknown_checkpoint_names_what_exists(done: Live) -> None:
    result = done.cli("rewind", done.sid, "--to", "cp-9999", "-y")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error:") and "checkpoints" in result.stderr
