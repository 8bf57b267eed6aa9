"""Two ``tilth worker`` processes on one queue, one killed mid-run: the other finishes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.agent.support import Seeded, model_env, team_server
from tests.attempts.support import RIGHT
from tilth.demo.script import Recipe, Team
from tilth.session.pipelines import L1_STAGES
from tilth.session.store import Session


def slow(team: Any, seconds: float) -> Any:
    """``team`` answering each request after ``seconds`` (a run long enough to kill mid-way)."""

    def answer(model: str, request: dict[str, Any]) -> dict[str, Any]:
        return {"type": "delay", "seconds": seconds, "then": team(model, request)}

    return answer


@contextmanager
def workers(
    count: int, env: Mapping[str, str], logs: Path, *, parallel: int = 2
) -> Iterator[list[subprocess.Popen[str]]]:
    """``count`` ``tilth worker --parallel <parallel>`` processes, each in its own process
    group; stopped after."""
    procs = []
    for n in range(count):
        log = open(logs / f"worker-{n}.log", "w")
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "tilth", "worker", "--parallel", str(parallel)],
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
        )
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def holder(session: Session) -> int | None:
    """The pid holding the session's lock (None: nobody yet)."""
    try:
        return int((session.dir / ".lock.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def wait_for(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def kill_a_worker_mid_run(seeded: Seeded, extra_env: Mapping[str, str], tmp_path: Path) -> None:
    """Queue ``seeded``; two workers take from the queue; the one running it is kill -9ed
    after its first stage; the other finishes it, each stage commit made once."""
    from tests.conftest import run_cli

    env = {**os.environ, **model_env("", TILTH_SANDBOX="off"), **extra_env}
    with team_server(
        slow(Team({"T-001": Recipe(files=dict(RIGHT), test_command="true")}), 0.3)
    ) as server:
        env["TILTH_BASE_URL"] = server.base_url
        queued = run_cli("enqueue", seeded.session.id, env=env, cwd=tmp_path)
        assert queued.returncode == 0, queued.stdout + queued.stderr
        with workers(2, env, tmp_path) as procs:
            pids = {p.pid: p for p in procs}
            first = wait_for(
                lambda: (pid := holder(seeded.session)) in pids and pid, 60, "a worker to start"
            )
            wait_for(
                lambda: any(e.type == "stage_completed" for e in seeded.events()),
                60,
                "the first stage",
            )
            os.killpg(first, signal.SIGKILL)
            pids[first].wait(timeout=10)
            wait_for(lambda: seeded.session.status == "all_done", 120, "the other worker")
            survivor = holder(seeded.session)
            assert survivor is None or survivor != first
            sid = seeded.session.id

            def said() -> str:
                return "".join(log.read_text() for log in tmp_path.glob("worker-*.log"))

            wait_for(lambda: f"{sid}: all_done" in said(), 30, "the worker to say it finished")
            assert f"{sid}: taken from the queue" in said()
    expected = [f"task/T-001: complete {stage} stage" for stage in L1_STAGES]
    assert seeded.subjects() == expected, (tmp_path / "worker-1.log").read_text()
    assert (seeded.worktree / "calc.py").read_text() == RIGHT["calc.py"]
    assert any(e.type == "session_resume" for e in seeded.events())
