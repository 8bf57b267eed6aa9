"""Loose ends a real run meets: a prep killed with -9, a task whose verifying never passes."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from agent.support import TASKS, model_env, recipes, seed_session, team_server, tilth
from seed.support import cli_env, session_dirs

from tests.warm_cli import DEVNULL, shared
from tilth.config import load_settings
from tilth.demo.script import Team
from tilth.model import FakeServer, Script, delay, reply
from tilth.session.store import Session


def test_a_prep_killed_with_sigkill_is_reported_interrupted(repo: Path, sessions_dir: Path) -> None:
    with FakeServer(Script([delay(60, reply("too late"))])) as server:
        env = {**os.environ, **cli_env(server)}
        child = shared().popen(
            ["prep-feature", str(repo), "--brief", "b"], env=env, stdout=DEVNULL, stderr=DEVNULL
        )
        deadline = time.monotonic() + 60
        while not server.requests:  # the interview is waiting on the model
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
    (session_dir,) = session_dirs(sessions_dir)
    session = Session(session_dir.name, session_dir)
    assert session.status == "running", "nothing could record the kill"
    listing = tilth("sessions", "--json")
    (row,) = json.loads(listing.stdout)
    assert (row["status"], row["state"]) == ("running", "interrupted")
    table = tilth("sessions")
    assert "interrupted" in table.stdout and "running" not in table.stdout
    with FakeServer(Script([])) as server:
        again = tilth("prep-feature", str(repo), "--brief", "b", env=cli_env(server))
    assert again.returncode == 2
    assert f"sessions/{session.id}/  interrupted  (prep did not finish" in again.stdout
    assert "--force" in again.stderr, "prep-feature offers to discard it"


def test_a_task_whose_verifying_never_passes_ends_with_the_cap_named(
    repo: Path, sessions_dir: Path
) -> None:
    assert load_settings().max_verify_failures_per_task == 3  # the default; two loops here
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    with team_server(Team(recipes())) as server:
        result = tilth(
            "run",
            str(repo),
            env=model_env(
                server.base_url,
                TILTH_LINT_COMMAND="echo lint says no; exit 1",
                TILTH_MAX_ITERATIONS_PER_TASK="0",
                TILTH_MAX_VERIFY_FAILURES_PER_TASK="2",
            ),
        )
    assert result.returncode == 3, result.stdout + result.stderr
    assert "T-001 failed (verify_cap) [TILTH_MAX_VERIFY_FAILURES_PER_TASK=2]" in result.stdout
    assert seeded.stops() == ["evaluator_cap"]  # SPEC §4's list; the detail names the cap
    (stop,) = [e.payload for e in seeded.events() if e.type == "stop"]
    assert "verify_cap" in stop["detail"] and "TILTH_MAX_VERIFY_FAILURES_PER_TASK" in stop["detail"]
    failed = [e.payload for e in seeded.events() if e.type == "task_failed"]
    assert failed[0]["reason"] == "verify_cap" and failed[0]["verify_failures"] == 2
    assert seeded.statuses() == {"T-001": "failed"}


def test_the_interviewers_reply_is_counted_live_on_a_terminal(
    repo: Path, sessions_dir: Path
) -> None:
    from seed.support import Terminal, write_seed

    from tilth.model import tool_call

    thinking = reply(
        None,
        tool_call("ask_user", question="Which file?", options=["a.py", "b.py"]),
        reasoning="let me read the repository first and think it over " * 8,
    )
    with FakeServer(Script([thinking, write_seed(1)])) as server:
        term = Terminal(["prep-feature", str(repo), "--brief", "b"], cli_env(server))
        term.expect("[interview · thinking")
        term.expect("tokens]")
        term.expect("Which file?")
        term.send("1")
        code, text = term.finish()
    assert code == 0, text
    assert "seed commit" in text
