"""The queue's database is pruned of finished workflows (past an age, past a count) when a
worker starts, never of one still pending or one a resume of an undecided attempt needs."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.attempts.queue_support import wait_for
from tilth.attempts import engine, retention
from tilth.config import load_settings
from tilth.session.store import Session

STOPPED = {"reason": "all_done", "detail": None}


def _off_any_loop(body: Any) -> None:
    """Run ``body`` in a thread of its own (DBOS refuses its synchronous calls where an event
    loop runs, as in this process's main thread after a browser test)."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            body()
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


def _kept() -> set[str]:
    from dbos import DBOS

    return {s.workflow_id for s in DBOS.list_workflows(load_input=False, load_output=False)}


def _attempt(sessions_dir: Path, repo: Path, parent: Session, checkpoint: str) -> Session:
    child = Session.create(sessions_dir, repo)
    child.update_checkpoint(
        kind="attempt",
        attempt={"parent": parent.id, "task_id": "T-001", "checkpoint": checkpoint, "number": 1},
    )
    return child


def _finished(session: Session, runs: list[str] | None = None, *, again: bool = False) -> str:
    """``session``'s attempt workflow, run to its end; its id (``runs`` hears each run)."""

    def local() -> dict[str, Any]:
        if runs is not None:
            runs.append(session.id)
        return STOPPED

    from dbos import DBOS

    workflow = engine.enqueue_attempt(session, local=local, again=again)
    assert engine.wait([workflow], seconds=60) == [STOPPED]
    # Its end is handed to the waiter here before DBOS writes it down: wait for that.
    wait_for(
        lambda: (
            DBOS.list_workflows(workflow_ids=[workflow], load_input=False)[0].status == "SUCCESS"
        ),
        60,
        f"{workflow} recorded as ended",
    )
    return workflow


def test_finished_workflows_are_pruned_but_never_one_a_resume_needs(
    tilth_home: Path, sessions_dir: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILTH_QUEUE_KEEP_DAYS", "0")
    parent = Session.create(sessions_dir, repo)
    parent.save_prd([{"id": "T-001", "title": "t", "status": "pending"}])
    decided = _attempt(sessions_dir, repo, parent, "cp-0001")
    waiting = _attempt(sessions_dir, repo, parent, "cp-0002")
    plain = Session.create(sessions_dir, repo)
    gone = Session("20260101-000000-000000", sessions_dir / "20260101-000000-000000")
    # Round one decided; round two (the task's latest) stopped before its choice.
    parent.log("attempts_started", task_id="T-001", checkpoint="cp-0001", attempts=[decided.id])
    parent.log(
        "attempt_selected",
        task_id="T-001",
        checkpoint="cp-0001",
        winner=decided.id,
        attempts=[{"session": decided.id}],
    )
    parent.log("attempts_started", task_id="T-001", checkpoint="cp-0002", attempts=[waiting.id])
    _off_any_loop(lambda: _prune(decided, waiting, plain, gone))


def _prune(decided: Session, waiting: Session, plain: Session, gone: Session) -> None:
    settings = load_settings()
    assert settings.queue_keep_days == 0
    engine.launch(settings, lambda session_id, sessions_dir: STOPPED, parallel=2)
    release = threading.Event()
    try:
        oldest = _finished(decided)
        needed, other, deleted = _finished(waiting), _finished(plain), _finished(gone)

        def held() -> dict[str, Any]:
            assert release.wait(60), "the test never let the workflow end"
            return STOPPED

        pending = engine.enqueue_attempt(
            Session("held", plain.dir.parent / "held"), local=held, again=False
        )
        everything = {oldest, needed, other, deleted, pending}
        assert _kept() == everything

        # Past the count: the oldest finished one goes (a week's age keeps every other).
        assert retention.prune(days=7, keep=3) == [oldest]
        assert _kept() == everything - {oldest}

        # A worker's start prunes those past TILTH_QUEUE_KEEP_DAYS (0: every finished one)
        # except the undecided attempt's, which its parent's resume asks for again.
        stop = threading.Event()
        stop.set()
        engine.work(settings, lambda session_id, sessions_dir: STOPPED, parallel=2, stop=stop)
        assert _kept() == {needed, pending}

        # An attempt run again is numbered past every workflow kept: the number of one
        # pruned is not taken again (DBOS would hand back that one's old result, not run it).
        runs: list[str] = []
        assert _finished(plain, runs) == other  # pruned, so made anew
        assert _finished(plain, runs, again=True) == f"{other}-1"
        assert retention.prune(days=7, keep=1) == [other]  # the undecided attempt's stays
        assert _finished(plain, runs, again=True) == f"{other}-2"
        assert runs == [plain.id] * 3, "each ran"
    finally:
        release.set()
        engine.shutdown()
