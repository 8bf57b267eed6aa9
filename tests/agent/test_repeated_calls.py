"""A worker that repeats the same failing call ends its task early, naming why (SPEC §12)."""

from __future__ import annotations

from pathlib import Path

from agent.support import TASKS, model_env, seed_session, tilth, worker_requests
from tilth.demo.script import EVALUATOR, WORKER
from tilth.model import FakeServer, Script, reply, tool_call


def test_a_worker_repeating_a_failing_call_fails_its_task_with_the_reason(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    stuck = reply(None, tool_call("read_file", path="no/such/file.py"))
    with FakeServer(Script({WORKER: [stuck] * 10, EVALUATOR: []})) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url))
        asked = worker_requests(server)
    output = result.stdout + result.stderr
    assert result.returncode == 3, output
    assert len(asked) == 3, "warned on the second failure, stopped on the third"
    warned = asked[2]["messages"][-1]["content"]
    assert "Do not repeat it" in warned
    failed = seeded.events("task_failed")[0].payload
    assert (failed["reason"], failed["tool"], failed["count"]) == ("repeated_calls", "read_file", 3)
    stop = seeded.events("stop")[-1].payload
    assert stop["reason"] == "no_case"  # SPEC §4's list; the detail names the guard
    assert "repeated_calls" in stop["detail"]
    assert "T-001 failed (repeated_calls) [TILTH_MAX_REPEATED_FAILURES=3]" in result.stdout
    assert "set a stronger TILTH_WORKER_MODEL" in output
    assert "iter_cap" not in output
    assert seeded.statuses() == {"T-001": "failed"}
