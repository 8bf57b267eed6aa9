"""Background runs: resume starts a child, stop interrupts it, a crashing run leaves the server.

Each session has one task: what is checked is the background process around the run (its
lock, its stop, its exit), which one task shows as well as two at half the work.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.agent.support import TASKS, recipes
from tests.web.support import Served, build_session, fake_model, serve, wait_for
from tilth.demo.script import Team
from tilth.model.script import Reply, delay
from tilth.session.store import Session

ONE_TASK = TASKS[:1]


class SlowTeam:
    """The working team, but every worker answer takes a while (so a run can be caught live)."""

    def __init__(self, seconds: float) -> None:
        self.team = Team(recipes())
        self.seconds = seconds  # set to 0 once the live run was caught: finishing need not be slow

    def __call__(self, model: str, request: dict[str, Any]) -> Reply:
        answer = self.team(model, request)
        return delay(self.seconds, answer) if model.endswith("worker") else answer


def types(session: Session) -> list[str]:
    return [e.type for e in session.events.events()]


def run_state(served: Served, sid: str) -> dict[str, Any]:
    detail = served.api("GET", f"/api/sessions/{sid}").json()
    return {**(detail["run"] or {}), "status": detail["status"], "locked_by": detail["locked_by"]}


EXPLAINING = ("session_resume", "stop", "task_attempt_failed", "task_failed")


def explain(state: dict[str, Any], session: Session) -> str:
    """Why a background run ended as it did: its exit, the stops, resumes and task failures
    it logged (with the turn and call each stop cut into), and the end of its output."""
    lines = [f"exit {state.get('exit_code')}, status {state.get('status')}"]
    last_step = ""
    for event in session.events.events():
        payload = event.payload
        if event.type in EXPLAINING:
            lines.append(f"{event.type} {json.dumps(payload)[:600]}" + last_step)
        elif event.type in ("model_call", "tool_call", "tool_result", "stage_started"):
            names = payload.get("tool") or payload.get("tool_calls") or ""
            last_step = (
                f"  (after {event.type} {payload.get('stage')} turn {payload.get('turn')} {names})"
            )
    return "\n".join([*lines, "--- run output (end) ---", str(state.get("output", ""))[-3000:]])


def test_stop_interrupts_a_background_run_and_resume_finishes_it(
    tmp_path: Path, tilth_home: Path
) -> None:
    """First a run killed outright (the server survives it, and it resumes), then a resumed
    run stopped from the page's button, then a resume that finishes the task. One session
    for both stories: a killed run and a stopped one are each caught at the model call."""
    team = SlowTeam(0.4)
    with fake_model(team) as model:
        built = build_session(tmp_path, model, ONE_TASK, run=False)
        with serve(built.env) as served:
            # ---- the server survives a crashing run
            crashed = served.api("POST", f"/api/sessions/{built.id}/resume", {}).json()["pid"]
            wait_for(lambda: "model_call" in types(built.session), 30, "the first model call")
            os.kill(crashed, signal.SIGKILL)
            state = wait_for(
                lambda: (s := run_state(served, built.id))["running"] is False and s, 30, "exit"
            )
            assert state["exit_code"] == -signal.SIGKILL
            assert state["locked_by"] is None  # a dead holder's pid file does not count
            detail = served.api("GET", f"/api/sessions/{built.id}").json()
            assert "tilth resume" in detail["run"]["output"]
            assert served.api("GET", "/api/sessions").status_code == 200
            calls = types(built.session).count("model_call")

            # ---- the session is still resumable after the crash; stop interrupts that run
            started = served.api("POST", f"/api/sessions/{built.id}/resume", {})
            assert started.status_code == 202, started.text
            pid = started.json()["pid"]
            assert started.json()["running"] is True
            wait_for(lambda: run_state(served, built.id)["locked_by"] == pid, 30, "the child lock")
            wait_for(
                lambda: types(built.session).count("model_call") > calls, 30, "a new model call"
            )
            twice = served.api("POST", f"/api/sessions/{built.id}/resume", {})
            assert twice.status_code == 409
            assert "already running" in twice.json()["error"]

            stopped = served.api("POST", f"/api/sessions/{built.id}/stop", {})
            assert stopped.status_code == 200, stopped.text
            assert stopped.json()["stopped"] == pid
            state = wait_for(
                lambda: (s := run_state(served, built.id))["running"] is False and s, 30, "exit"
            )
            assert state["exit_code"] == 130, explain(state, built.session)
            assert built.session.last_stop() == "interrupted", explain(state, built.session)
            assert served.api("POST", f"/api/sessions/{built.id}/stop", {}).json() == {
                "stopped": None
            }

            # ---- resume finishes it
            team.seconds = 0
            again = served.api("POST", f"/api/sessions/{built.id}/resume", {})
            assert again.status_code == 202
            done = wait_for(
                lambda: (s := run_state(served, built.id))["exit_code"] is not None and s, 90
            )
            assert done["exit_code"] == 0, explain(done, built.session)
            assert done["status"] == "all_done", explain(done, built.session)


def test_stopping_the_server_interrupts_its_runs_which_stay_resumable(
    tmp_path: Path, tilth_home: Path
) -> None:
    with fake_model(SlowTeam(0.4)) as model:
        built = build_session(tmp_path, model, ONE_TASK, run=False)
        with serve(built.env) as served:
            pid = served.api("POST", f"/api/sessions/{built.id}/resume", {}).json()["pid"]
            wait_for(lambda: "model_call" in types(built.session), 30, "the first model call")
            os.killpg(served.process.pid, signal.SIGINT)  # Ctrl-C in the server's terminal
            assert served.process.wait(30) == 0
        assert built.session.last_stop() == "interrupted"
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        with built.session.lock():  # nothing holds the session any more
            pass


def test_a_finished_run_is_forgotten_once_its_session_is_gone(
    tmp_path: Path, tilth_home: Path
) -> None:
    """The server keeps an ended run's exit and output while its session is there to show
    them; a session deleted meanwhile (``tilth reset``) takes its run entry with it."""
    import shutil

    from tilth.web.runs import Runs

    repo = tmp_path / "repo"
    repo.mkdir()
    runs = Runs(tilth_home)
    kept, gone = (Session.create(tilth_home / "sessions", repo) for _ in range(2))
    for session in (kept, gone):
        runs.start(session, None).process.wait(60)  # resume refuses a session without a seed
    shutil.rmtree(gone.dir)
    runs.reap()
    assert runs.get(gone.id) is None
    ended = runs.state(kept.id)
    assert ended is not None and ended["exit_code"] not in (None, 0)
