"""Small truths of the timeline, on a real run through the library (in-process, scripted)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import tilth
from tests.agent.support import TASKS, Seeded, recipes, seed_session
from tilth.demo.script import Team
from tilth.model.script import Reply


def _settings() -> tilth.Settings:
    return tilth.load_settings(
        {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "TILTH_SANDBOX": "off"}
    )


def _run(repo: Path, sessions_dir: Path) -> tilth.Session:
    seeded = seed_session(sessions_dir, repo, TASKS[:2])
    script = tilth.Script(Team(recipes()))
    stop = tilth.run(
        seeded.session,
        worker=tilth.ScriptedModel(script, "worker"),
        evaluator=tilth.ScriptedModel(script, "evaluator"),
        settings=_settings(),
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
    record = child.record().to_dict()
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


def _interrupted(repo: Path, sessions_dir: Path) -> tuple[Seeded, tilth.Script]:
    """A one-task run stopped by Ctrl-C after the worker wrote ``textkit/words.py`` in its
    first implementing turn, before any stage committed it; the next implementing request
    (a resumed run's first) is answered with Ctrl-C again."""
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    team = Team(recipes())
    implementing = []

    def script(model: str, request: dict[str, Any]) -> Reply:
        tools = {t.get("function", {}).get("name") for t in request.get("tools") or []}
        if "submit_case" in tools:
            implementing.append(model)
            if len(implementing) in (2, 3):
                raise KeyboardInterrupt
        return team(model, request)

    scripted = tilth.Script(script)
    stop = tilth.run(
        seeded.session,
        worker=tilth.ScriptedModel(scripted, "worker"),
        evaluator=tilth.ScriptedModel(scripted, "evaluator"),
        settings=_settings(),
    )
    assert stop.reason == "interrupted", stop
    assert (seeded.worktree / "textkit" / "words.py").is_file()
    return seeded, scripted


def test_a_run_stopped_mid_task_keeps_its_uncommitted_work_on_the_timeline(
    repo: Path, sessions_dir: Path
) -> None:
    """The stop checkpoint holds the uncommitted file, so a fork at latest has it and a
    rewind to before it removes it."""
    seeded, _ = _interrupted(repo, sessions_dir)
    written = seeded.worktree / "textkit" / "words.py"
    timeline = tilth.open_timeline(seeded.session)
    latest = timeline.resolve("latest")
    assert latest.kind == "stop" and "textkit/words.py" in latest.overlay
    with timeline.writing():
        child = timeline.fork(latest)
    assert (child.worktree / "textkit" / "words.py").read_bytes() == written.read_bytes()
    with timeline.writing():
        plan = timeline.plan_rewind(timeline.resolve("T-001/planning"), "both")
        assert ("delete", "textkit/words.py") in plan.files, plan.render()
        timeline.execute(plan)
    assert not written.exists()


def test_the_worker_reads_the_files_restored_note_in_its_next_request(
    repo: Path, sessions_dir: Path
) -> None:
    """A code-only rewind mid-stage keeps the conversation: the resumed worker's first
    request carries the note, after the messages that describe the files it lost."""
    seeded, scripted = _interrupted(repo, sessions_dir)
    timeline = tilth.open_timeline(seeded.session)
    with timeline.writing():
        timeline.execute(timeline.plan_rewind(timeline.resolve("T-001/planning"), "code"))
    worker = tilth.ScriptedModel(scripted, "worker")
    stop = tilth.resume(
        seeded.session,
        worker=worker,
        evaluator=tilth.ScriptedModel(scripted, "evaluator"),
        settings=_settings(),
    )
    assert stop.reason == "interrupted", stop
    first = [str(m.get("content")) for m in worker.requests[0]["messages"]]
    noted = [i for i, text in enumerate(first) if "were restored to checkpoint" in text]
    wrote = [i for i, text in enumerate(first) if "wrote" in text and "words.py" in text]
    assert noted and wrote and noted[-1] > wrote[-1], first
