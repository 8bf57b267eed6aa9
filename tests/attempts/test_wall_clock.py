"""Attempts stopped by the wall-clock cap stop the run as the cap would stop it alone:
reason ``wall_clock``, exit 3, the session still resumable (``running``), never an
``error`` with exit 1 and status ``failed`` (found in the llama.cpp user trial: a
3-minute cap on `tilth run --attempts 2` ended ``stopped error``, exit 1)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from tests.agent.support import model_env, team_server
from tests.attempts.queue_support import wait_for
from tests.attempts.support import differing_team, seed_add
from tests.conftest import run_cli
from tests.warm_cli import DEVNULL, PIPE, shared
from tilth.model.script import reply, tool_call
from tilth.session.store import Session


def slow_busy_worker(model: str, request: dict[str, Any]) -> dict[str, Any]:
    """Every reply is one more ``bash`` call, a little late: no attempt ends its task,
    so only the wall clock stops them."""
    return {"type": "delay", "seconds": 0.2, "then": reply(None, tool_call("bash", command="true"))}


def test_attempts_cut_short_by_the_wall_clock_stop_the_run_on_the_wall_clock(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    seeded = seed_add(sessions_dir, repo)
    env = model_env(
        "",
        TILTH_SANDBOX="off",
        TILTH_MAX_ITERATIONS_PER_TASK="0",
        TILTH_MAX_WALL_CLOCK_MINUTES="0.03",
    )
    with team_server(slow_busy_worker) as server:
        env["TILTH_BASE_URL"] = server.base_url
        result = run_cli(
            "run", str(repo), "--attempts", "2", "--parallel", "2", env=env, cwd=tmp_path
        )
    output = result.stdout + result.stderr
    assert result.returncode == 3, output
    assert seeded.session.last_stop() == "wall_clock", output
    assert seeded.session.status == "running", output
    assert "TILTH_MAX_WALL_CLOCK_MINUTES" in output
    assert f"tilth resume {seeded.session.id}" in output
    assert "stopped   error" not in output
    # The summary's status agrees with `tilth sessions`: the run has ended.
    assert "status    stopped, resumable" in output and "status    running" not in output


def test_a_plain_resume_runs_the_attempts_a_cap_cut_short_on(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    """The stop's advice, `tilth resume <id>` (no --attempts), continues the attempts; it
    used to start the task over in place beside them and leave them undecided."""
    seeded = seed_add(sessions_dir, repo)
    env = model_env(
        "",
        TILTH_SANDBOX="off",
        TILTH_MAX_ITERATIONS_PER_TASK="0",
        # Long enough (6 s) for the run to fork the attempts on a loaded machine first.
        TILTH_MAX_WALL_CLOCK_MINUTES="0.1",
    )
    with team_server(slow_busy_worker) as server:
        env["TILTH_BASE_URL"] = server.base_url
        stopped = run_cli("run", str(repo), "--attempts", "2", env=env, cwd=tmp_path)
    assert stopped.returncode == 3, stopped.stdout + stopped.stderr
    started = [e.payload for e in seeded.events() if e.type == "attempts_started"]
    assert len(started) == 1 and len(started[0]["attempts"]) == 2
    env = model_env("", TILTH_SANDBOX="off", TILTH_MAX_ITERATIONS_PER_TASK="4")
    with team_server(differing_team(right=1, count=2)) as server:
        env["TILTH_BASE_URL"] = server.base_url
        resumed = run_cli("resume", seeded.session.id, env=env, cwd=tmp_path, timeout=240)
    output = resumed.stdout + resumed.stderr
    assert "2 attempts from" in output, output
    selected = [e.payload for e in seeded.events() if e.type == "attempt_selected"]
    assert [s["task_id"] for s in selected] == ["T-001"], output
    assert {a["session"] for a in selected[0]["attempts"]} == set(started[0]["attempts"])


def _attempt_spend(sessions_dir: Path, ids: list[str]) -> dict[str, int]:
    """Each attempt's tokens since its fork (the seed here, at 0 tokens)."""
    import json

    return {
        i: int(json.loads((sessions_dir / i / "checkpoint.json").read_text())["tokens_used"])
        for i in ids
    }


def test_attempts_cut_short_count_in_the_summary_and_the_caps(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    """Found in the user trial: a stop (the wall clock, Ctrl-C) of `--attempts 2` summed up
    as `tokens 0 by runs` though both attempts had spent thousands, and a resume went on
    past a token cap they had already used up."""
    seeded = seed_add(sessions_dir, repo)
    env = model_env("", TILTH_SANDBOX="off", TILTH_MAX_ITERATIONS_PER_TASK="0")
    with team_server(slow_busy_worker) as server:
        env["TILTH_BASE_URL"] = server.base_url
        run = shared().popen(
            ["run", str(repo), "--attempts", "2"],
            stdin=DEVNULL,
            stdout=PIPE,
            stderr=PIPE,
            env={**os.environ, **env},
            cwd=tmp_path,
        )
        with run:

            def attempts() -> list[str]:
                found = [e.payload for e in seeded.events() if e.type == "attempts_started"]
                return list(found[0]["attempts"]) if found else []

            ids = wait_for(attempts, 90, "the attempts to be forked")
            wait_for(
                lambda: all(_attempt_spend(sessions_dir, ids).values()),
                90,
                "each attempt's first model call",
            )
            run.send_signal(signal.SIGINT)
            out, err = run.communicate(timeout=90)
    output = out + err
    assert run.returncode == 130, output
    spent = _attempt_spend(sessions_dir, ids)
    total = sum(spent.values())
    assert seeded.session.tokens_used == 0  # undecided: not in the parent's own count
    assert f"tokens    {total:,} by runs" in output, output
    for attempt, tokens in spent.items():
        line = f"{attempt}: undecided: stopped: interrupted, at "
        assert line in output and f", {tokens:,} token(s) so far" in output, output

    # Their spend counts toward the session's token cap: a resume under a cap they used up
    # stops at once, before it runs them again.
    env["TILTH_MAX_TOKENS"] = str(total)
    with team_server(slow_busy_worker) as server:
        env["TILTH_BASE_URL"] = server.base_url
        resumed = run_cli("resume", seeded.session.id, env=env, cwd=tmp_path)
        calls = len(server.requests)
    output = resumed.stdout + resumed.stderr
    assert resumed.returncode == 3, output
    assert seeded.session.last_stop() == "token_cap", output
    assert calls == 0, output
    assert f"tokens    {total:,} by runs (100% of TILTH_MAX_TOKENS={total:,})" in output, output
    assert _attempt_spend(sessions_dir, ids) == spent


def test_an_attempt_that_waited_for_its_turn_shares_the_runs_wall_clock(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    """TILTH_MAX_WALL_CLOCK_MINUTES is per invocation: with one attempt at a time, the
    second used to start once the first had used the cap up, with a fresh clock of its own."""
    seeded = seed_add(sessions_dir, repo)
    env = model_env(
        "",
        TILTH_SANDBOX="off",
        TILTH_MAX_ITERATIONS_PER_TASK="0",
        # Long enough (6 s) for the run to fork the attempts on a loaded machine first.
        TILTH_MAX_WALL_CLOCK_MINUTES="0.1",
    )
    with team_server(slow_busy_worker) as server:
        env["TILTH_BASE_URL"] = server.base_url
        result = run_cli(
            "run", str(repo), "--attempts", "2", "--parallel", "1", env=env, cwd=tmp_path
        )
    output = result.stdout + result.stderr
    assert result.returncode == 3, output
    assert seeded.session.last_stop() == "wall_clock", output
    (started,) = [e.payload for e in seeded.events() if e.type == "attempts_started"]
    second = Session(started["attempts"][1], sessions_dir / started["attempts"][1])
    # The cap was up when the second's turn came: it stopped before its first model call.
    assert second.last_stop() == "wall_clock", output
    assert not any(e.type == "model_call" for e in second.events.events()), output
