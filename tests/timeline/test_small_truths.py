"""Small truths of the timeline, on a real run through the library (in-process, scripted)."""

from __future__ import annotations

import os
from pathlib import Path

import tilth
from tests.agent.support import TASKS, recipes, seed_session
from tilth.demo.script import Team


def _run(repo: Path, sessions_dir: Path) -> tilth.Session:
    seeded = seed_session(sessions_dir, repo, TASKS[:2])
    script = tilth.Script(Team(recipes()))
    stop = tilth.run(
        seeded.session,
        worker=tilth.ScriptedModel(script, "worker"),
        evaluator=tilth.ScriptedModel(script, "evaluator"),
        settings=tilth.load_settings(
            {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "TILTH_SANDBOX": "off"}
        ),
    )
    assert stop.reason == "all_done", stop
    return seeded.session


def test_a_fork_at_latest_of_a_finished_session_is_the_finished_state(
    repo: Path, sessions_dir: Path
) -> None:
    session = _run(repo, sessions_dir)
    timeline = tilth.open_timeline(session)
    latest = timeline.resolve("latest")
    assert latest.kind == "stop" and latest.state["status"] == "all_done"
    with timeline.writing():
        child = timeline.fork(latest).session
    record = child.checkpoint()
    assert record["status"] == "all_done"
    assert {t["id"]: t["status"] for t in child.load_prd()} == {"T-001": "done", "T-002": "done"}
    stops = [e.payload["reason"] for e in child.events.events() if e.type == "stop"]
    assert stops == ["all_done"], "no stale stop from an earlier instant"
    assert child.events.events()[-1].type == "fork"


def test_the_files_restored_note_goes_to_the_thread_the_worker_reads_next(
    repo: Path, sessions_dir: Path
) -> None:
    session = _run(repo, sessions_dir)
    threads = session.threads.directory
    # An evaluator thread is the one written last (as after a review round).
    evaluator = sorted(threads.glob("evaluator.*.jsonl"))[-1]
    os.utime(evaluator, ns=(2**62, 2**62))
    timeline = tilth.open_timeline(session)
    with timeline.writing():
        plan = timeline.plan_rewind(timeline.resolve("T-002/planning"), "code")
        assert plan.note is not None
        assert plan.note["thread"].startswith("worker."), plan.note["thread"]
        assert plan.threads is None or plan.note["thread"] in plan.threads
        timeline.execute(plan)
    note = session.threads.get(plan.note["thread"]).read()[-1]
    assert note.meta["kind"] == "rewind_note" and "restored" in note.message["content"]
