"""The run's derived records (summary.json, progress.txt) and its terminal progress."""

from __future__ import annotations

import io
import json
from pathlib import Path

from tilth.agent.loop import next_task
from tilth.agent.records import append_progress, write_summary
from tilth.agent.stops import Stop
from tilth.session.store import Session
from tilth.session.task import tasks_of
from tilth.ui.io import IO
from tilth.ui.progress import TerminalProgress


def _session(tmp_path: Path) -> Session:
    session = Session.create(tmp_path / "sessions", tmp_path)
    session.save_prd(
        [
            {"id": "T-001", "title": "a", "status": "done"},
            {"id": "T-002", "title": "b", "status": "failed"},
            {"id": "T-003", "title": "c", "status": "pending"},
        ]
    )
    return session


def test_summary_is_rolled_up_from_the_event_log(tmp_path: Path) -> None:
    session = _session(tmp_path)
    log = session.log
    log("session_start", phase="prep-feature")
    log("session_start", phase="run")
    for turn in (1, 2):
        log("model_call", actor="worker", task_id="T-001", turn=turn, prompt_tokens=10,
            completion_tokens=5, tokens_used_total=15 * turn)  # fmt: skip
    log("tool_call", task_id="T-001", tool="write_file")
    log("tool_call", task_id="T-001", tool="bash")
    log("tool_call", task_id="T-001", tool="bash")
    log("model_call", actor="evaluator", task_id="T-001", prompt_tokens=7, completion_tokens=3,
        tokens_used_total=40)  # fmt: skip
    log("evaluator_verdict", task_id="T-001", verdict="reject", rejection_category="weak_test")
    log("evaluator_verdict", task_id="T-001", verdict="accept", rejection_category=None)
    log("stage_completed", task_id="T-001", stage="planning", sha="abc")
    log("task_done", task_id="T-001", summary="ok")
    log("task_failed", task_id="T-002", reason="iter_cap")
    log("model_retry", role="worker", attempt=1, reason="HTTP 503", delay=0.1)
    log("stop", reason="iter_cap")
    # A torn last line (a crash mid-append) must not break the roll-up.
    with open(session.events.path, "a", encoding="utf-8") as handle:
        handle.write('{"type": "model_call", "payl')

    summary = write_summary(session)
    assert json.loads(session.summary_path.read_text()) == summary
    assert summary["version"] == 1
    assert summary["tokens"] == {"prompt": 27, "completion": 13, "total": 40}
    t1 = summary["tasks"]["T-001"]
    assert t1["status"] == "done" and t1["turns"] == 2 and t1["tokens"] == 40
    assert t1["tool_calls"] == {"write_file": 1, "bash": 2}
    assert t1["stages_completed"] == ["planning"]
    assert t1["evaluator"] == {
        "accepts": 1,
        "rejects": 1,
        "rejection_categories": {"weak_test": 1},
    }
    assert summary["tasks"]["T-002"] == {**summary["tasks"]["T-002"], "status": "failed",
                                         "failure_reason": "iter_cap"}  # fmt: skip
    assert summary["tool_histogram"] == {"write_file": 1, "bash": 2}
    assert summary["model_retries"] == 1
    assert summary["runs"] == 1
    assert summary["stop"]["reason"] == "iter_cap"
    assert summary["task_counts"] == {
        "total": 3,
        "done": 1,
        "failed": 1,
        "pending": 1,
        "in_progress": 0,
    }


def test_progress_lines_are_one_per_outcome(tmp_path: Path) -> None:
    session = _session(tmp_path)
    append_progress(session, "T-001", "done", "Count\nwords")
    append_progress(session, "T-002", "failed:no_case", "Shout")
    assert (
        session.progress_path.read_text()
        == "T-001\tdone\tCount words\nT-002\tfailed:no_case\tShout\n"
    )


def test_next_task_continues_an_interrupted_task_first() -> None:
    tasks = tasks_of(
        [
            {"id": "T-001", "status": "done"},
            {"id": "T-002"},
            {"id": "T-003", "status": "in_progress"},
        ]
    )
    assert next_task(tasks) == tasks[2]
    assert next_task(tasks[:2]) == tasks[1]
    assert next_task(tasks[:1]) is None


def test_stop_maps_to_status_and_exit_code() -> None:
    table = {
        "all_done": ("all_done", 0),
        "wall_clock": ("running", 3),
        "token_cap": ("running", 3),
        "interrupted": ("running", 130),
        "iter_cap": ("failed", 3),
        "evaluator_cap": ("failed", 3),
        "empty_responses": ("failed", 3),
        "no_case": ("failed", 3),
        "error": ("failed", 1),
    }
    assert {reason: (Stop(reason).status, Stop(reason).exit_code) for reason in table} == table


def test_plain_progress_prints_a_line_when_task_stage_or_turn_moves() -> None:
    buffer = io.StringIO()
    progress = TerminalProgress(IO(stdout=buffer), label="scripted model")
    assert not progress.live
    with progress:
        progress.status(task="T-001", tokens=0)
        progress.status(stage="planning")
        progress.status(tokens=50)  # tokens alone are not news
        progress.status(turn=1, tokens=60)
        progress.note("T-001 planning done")
        progress.status(stage="implementing")
    assert buffer.getvalue().splitlines() == [
        "scripted model · T-001 · 0 tokens",
        "scripted model · T-001 · planning · 0 tokens",
        "scripted model · T-001 · planning · turn 1 · 60 tokens",
        "T-001 planning done",
        "scripted model · T-001 · implementing · 60 tokens",
    ]


def test_live_progress_keeps_one_status_line() -> None:
    buffer = io.StringIO()
    progress = TerminalProgress(IO(stdout=buffer), live=True)
    with progress:
        progress.status(task="T-001", stage="planning", turn=2, tokens=1234)
        assert progress.line() == "T-001 · planning · turn 2 · 1,234 tokens"
        progress.note("a note")
    assert "a note" in buffer.getvalue()
    assert "T-001 · planning · turn 2" not in buffer.getvalue().replace("\r", "\n").splitlines()
