"""``TILTH_MAX_WALL_CLOCK_MINUTES`` holds for the interview as for a run, inside a turn too;
the time a question waits for its answer is not counted (found in the user trial: 60 turns
of up to ~3 minutes each with a weak model, and no cap)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from seed.support import cli_env, session_dirs, write_seed

from tests.conftest import run_cli
from tests.sessionview import SessionView
from tests.warm_cli import PIPE, shared
from tilth.model import FakeServer, Script, reply, tool_call


def test_a_reply_still_streaming_at_the_cap_is_cancelled(
    tilth_home: Path, sessions_dir: Path, repo: Path
) -> None:
    slow = {"type": "delay", "seconds": 90, "then": write_seed(1)}
    with FakeServer(Script([slow])) as server:
        started = time.monotonic()
        result = shared().run(
            ["prep-feature", str(repo), "--brief", "b"],
            # 6 s: room for the prep to reach its first request on a loaded machine.
            env={**os.environ, **cli_env(server, TILTH_MAX_WALL_CLOCK_MINUTES="0.1")},
            input_text="",
            timeout=60,
        )
        took = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    assert took < 45, took  # not the 90 s the reply would have taken
    (session_dir,) = session_dirs(sessions_dir)
    assert "the interview reached the wall-clock cap mid-reply" in result.stderr
    assert "[TILTH_MAX_WALL_CLOCK_MINUTES=0.1]" in result.stderr
    assert f"tilth reset {session_dir.name} -y" in result.stderr
    assert f"tilth prep-feature {repo}" in result.stderr
    assert "Traceback" not in result.stderr
    view = SessionView.at(session_dir)
    assert view.status == "failed"
    assert [s["reason"] for s in view.payloads("stop")] == ["wall_clock"]
    assert [c["reason"] for c in view.payloads("model_call_cancelled")] == ["wall_clock"]
    # The advice works: the session is discarded, and the workspace is free to prep again.
    reset = run_cli("reset", session_dir.name, "-y")
    assert reset.returncode == 0, reset.stdout + reset.stderr
    assert session_dirs(sessions_dir) == []


def test_many_quick_turns_stop_at_the_cap(tilth_home: Path, sessions_dir: Path, repo: Path) -> None:
    """A model that keeps reading, each reply quick, is stopped at the cap (between turns
    or inside one, wherever the deadline falls)."""
    look = {"type": "delay", "seconds": 0.3, "then": reply(None, tool_call("glob", pattern="*"))}
    with FakeServer(Script([look] * 40)) as server:
        result = shared().run(
            ["prep-feature", str(repo), "--brief", "b"],
            env={**os.environ, **cli_env(server, TILTH_MAX_WALL_CLOCK_MINUTES="0.1")},
            input_text="",
            timeout=60,
        )
        calls = len(server.requests)
    assert result.returncode == 1, result.stderr
    assert "the interview reached the wall-clock cap" in result.stderr
    assert 1 < calls < 40, calls
    (session_dir,) = session_dirs(sessions_dir)
    assert [s["reason"] for s in SessionView.at(session_dir).payloads("stop")] == ["wall_clock"]


def test_waiting_for_an_answer_is_not_counted(
    tilth_home: Path, sessions_dir: Path, repo: Path
) -> None:
    script = Script([reply(None, tool_call("ask_user", question="Why?")), write_seed(1)])
    with FakeServer(script) as server:
        child = shared().popen(
            ["prep-feature", str(repo), "--brief", "b"],
            stdin=PIPE,
            stdout=PIPE,
            stderr=PIPE,
            env={**os.environ, **cli_env(server, TILTH_MAX_WALL_CLOCK_MINUTES="0.08")},
        )
        try:
            deadline = time.monotonic() + 60
            while not server.requests:
                assert time.monotonic() < deadline, "the prep never asked the model"
                time.sleep(0.05)
            time.sleep(6)  # the person thinks, longer than the whole cap (4.8 s)
            _, stderr = child.communicate("because\n", timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert child.returncode == 0, stderr
    (session_dir,) = session_dirs(sessions_dir)
    assert SessionView.at(session_dir).status == "prepared"
