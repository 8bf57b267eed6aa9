"""Attempts running at once share the session's token cap as they spend: together they run
past ``TILTH_MAX_TOKENS`` by at most the turn each has in flight, and the run stops on it."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from typing import Any

from tests.agent.support import model_env, team_server
from tests.attempts.support import seed_add
from tests.conftest import run_cli
from tilth.model.script import reply, tool_call

TURN_TOKENS = 100
CAP = 1_000
ATTEMPTS = 3


def busy_worker() -> Any:
    """Every reply is one more ``bash`` call costing ``TURN_TOKENS``: no attempt ever ends
    its task, so only the cap stops them (a little delay lets the three interleave)."""
    counter = itertools.count()
    lock = threading.Lock()

    def answer(model: str, request: dict[str, Any]) -> dict[str, Any]:
        with lock:
            n = next(counter)
        turn = reply(None, tool_call("bash", command=f"echo {n}"), prompt_tokens=TURN_TOKENS)
        turn["usage"]["completion_tokens"] = 0
        return {"type": "delay", "seconds": 0.05, "then": turn}

    return answer


def test_parallel_attempts_stop_together_at_the_session_cap(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    seeded = seed_add(sessions_dir, repo)
    env = model_env(
        "",
        TILTH_SANDBOX="off",
        TILTH_MAX_ITERATIONS_PER_TASK="200",
        TILTH_MAX_TOKENS=str(CAP),
    )
    with team_server(busy_worker()) as server:
        env["TILTH_BASE_URL"] = server.base_url
        result = run_cli(
            "run",
            str(repo),
            "--attempts",
            str(ATTEMPTS),
            "--parallel",
            str(ATTEMPTS),
            env=env,
            cwd=tmp_path,
            timeout=240,
        )
    assert result.returncode == 3, result.stdout + result.stderr
    assert "token cap" in result.stdout + result.stderr
    assert seeded.session.last_stop() == "token_cap"
    started = [e.payload for e in seeded.events() if e.type == "attempts_started"]
    children = [sessions_dir / str(a) for a in started[0]["attempts"]]
    spent = [_spent(child) for child in children]
    # Each stopped on the cap, all of them having spent something...
    assert all(s >= TURN_TOKENS for s in spent), spent
    # ...and together at most one turn each past it (alone, each would have spent CAP).
    assert CAP <= sum(spent) <= CAP + ATTEMPTS * TURN_TOKENS, spent


def _spent(child: Path) -> int:
    """What an attempt spent on its task (its count less the fork's, 0 at the seed here)."""
    import json

    stops = [
        json.loads(line)
        for line in (child / "events.jsonl").read_text().splitlines()
        if '"type": "stop"' in line
    ]
    assert stops and stops[-1]["payload"]["reason"] == "token_cap", stops[-1:]
    return int(json.loads((child / "checkpoint.json").read_text())["tokens_used"])


def test_a_resume_counts_the_stopped_attempts_spend_against_the_cap(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    """With the same cap it stops before any model call; with a higher one the same
    attempts go on (none forked again) and stop together at the new cap."""
    seeded = seed_add(sessions_dir, repo)
    env = model_env(
        "", TILTH_SANDBOX="off", TILTH_MAX_ITERATIONS_PER_TASK="200", TILTH_MAX_TOKENS=str(CAP)
    )
    with team_server(busy_worker()) as server:
        env["TILTH_BASE_URL"] = server.base_url
        first = run_cli("run", str(repo), "--attempts", "2", env=env, cwd=tmp_path, timeout=240)
        asked = len(server.requests)
        same = run_cli("resume", seeded.session.id, env=env, cwd=tmp_path, timeout=240)
        assert len(server.requests) == asked, "the attempts' spend already reached the cap"
        env["TILTH_MAX_TOKENS"] = str(CAP + 3 * TURN_TOKENS)
        more = run_cli(
            "resume", seeded.session.id, "--attempts", "2", env=env, cwd=tmp_path, timeout=240
        )
    for result in (first, same, more):
        assert result.returncode == 3, result.stdout + result.stderr
        assert seeded.session.last_stop() == "token_cap"
    assert "token cap reached [TILTH_MAX_TOKENS=1000]" in same.stdout
    (started,) = [e.payload for e in seeded.events() if e.type == "attempts_started"]
    spent = [_spent(sessions_dir / str(a)) for a in started["attempts"]]
    assert CAP + 3 * TURN_TOKENS <= sum(spent) <= CAP + 5 * TURN_TOKENS, spent
