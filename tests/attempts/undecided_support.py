"""A best-of-N run stopped with Ctrl-C before its task's attempts were decided: attempt 1
passed its task, attempt 2 was still busy (it never ends its first stage)."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.agent.support import Seeded, model_env, team_server
from tests.attempts.queue_support import wait_for
from tests.attempts.support import differing_team, seed_add, start_run
from tests.conftest import run_cli
from tilth.model.script import reply, tool_call
from tilth.session.store import Session


@dataclass
class Stopped:
    seeded: Seeded
    attempts: list[Session]
    """Attempt 1 (its task done), attempt 2 (stopped by the Ctrl-C)."""
    while_running: list[dict[str, Any]]
    """``tilth attempts --json`` taken while attempt 2 ran."""
    output: str


def one_passes_one_is_busy() -> Any:
    """Attempt 1 writes the correct ``add()``; attempt 2 only ever calls ``bash``."""
    team = differing_team(right=1, count=2)

    def answer(model: str, request: dict[str, Any]) -> dict[str, Any]:
        if "You are attempt 2 of 2" in json.dumps(request):
            busy = reply(None, tool_call("bash", command="true"))
            return {"type": "delay", "seconds": 0.2, "then": busy}
        return team(model, request)  # type: ignore[no-any-return]

    return answer


def stop_mid_attempts(
    repo: Path,
    sessions_dir: Path,
    tmp_path: Path,
    during: Callable[[Seeded, list[Session]], None] | None = None,
) -> Stopped:
    """``tilth run --attempts 2 --parallel 1``, Ctrl-C once attempt 2 has spent tokens
    (and ``during`` has looked at the run going on)."""
    seeded = seed_add(sessions_dir, repo)
    env = {
        **os.environ,
        **model_env("", TILTH_SANDBOX="off", TILTH_MAX_ITERATIONS_PER_TASK="0"),
    }
    with team_server(one_passes_one_is_busy()) as server:
        env["TILTH_BASE_URL"] = server.base_url
        run = start_run(repo, env, tmp_path, "--attempts", "2", "--parallel", "1")
        try:

            def started() -> list[str]:
                found = [e.payload for e in seeded.events() if e.type == "attempts_started"]
                return list(found[0]["attempts"]) if found else []

            ids = wait_for(started, 120, "the attempts to be forked")
            attempts = [Session(i, sessions_dir / i) for i in ids]
            wait_for(lambda: attempts[1].tokens_used > 0, 120, "attempt 2's first model call")
            listed = run_cli("attempts", seeded.session.id, "--json")
            assert listed.returncode == 0, listed.stdout + listed.stderr
            if during is not None:
                during(seeded, attempts)
            os.killpg(run.pid, signal.SIGINT)
            output, _ = run.communicate(timeout=90)
        finally:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
                run.wait()
    assert run.returncode == 130, output
    assert not any(e.type == "attempt_selected" for e in seeded.events()), output
    return Stopped(seeded, attempts, json.loads(listed.stdout), output)
