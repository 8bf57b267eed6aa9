"""A worker that repeats the same failing call ends its task early, naming why (SPEC §12)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.support import GOOD, TASKS, model_env, recipes, seed_session, tilth, worker_requests
from tilth.demo.script import EVALUATOR, WORKER, Recipe, Team
from tilth.model import FakeServer, Script, reply, tool_call
from tilth.model.base import ToolCall
from tilth.model.script import Reply


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


@dataclass
class Interleaved:
    """The scripted team, whose worker first takes ``rounds`` implementing turns that each
    make ``calls(n)`` (a repeated miss beside real work, or a loop)."""

    rounds: int
    calls: Callable[[int], list[ToolCall]]
    team: Team = field(default_factory=lambda: Team(recipes(T_001=Recipe(files=GOOD["T-001"]))))

    def __call__(self, model: str, request: dict[str, Any]) -> Reply:
        tools = {t["function"]["name"] for t in request.get("tools") or []}
        done = [m for m in request.get("messages") or [] if m.get("role") == "assistant"]
        if model == WORKER and "submit_case" in tools and len(done) < self.rounds:
            return reply(None, *self.calls(len(done)))
        return self.team(model, request)


def test_a_miss_the_worker_comes_back_to_between_real_steps_does_not_fail_its_task(
    repo: Path, sessions_dir: Path
) -> None:
    # It reads the module it will write last, finds it missing, writes a step, and again:
    # five identical misses, each after new work, are no loop.
    seeded = seed_session(sessions_dir, repo, TASKS[:1])

    def step(n: int) -> list[ToolCall]:
        wrote = tool_call("write_file", path=f"notes/step{n}.md", content=f"step {n}\n")
        return [tool_call("read_file", path="textkit/words.py"), wrote]

    with FakeServer(Script(Interleaved(5, step))) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert seeded.events("repeated_failure") == []
    assert seeded.statuses() == {"T-001": "done"}
    misses = [p for p in seeded.payloads("tool_result") if p["tool"] == "read_file"]
    assert len(misses) == 5 and all(p["is_error"] for p in misses)
    assert not any("Do not repeat it" in p["result_preview"] for p in misses)


def test_the_trials_loop_the_same_write_and_the_same_failing_calls_still_fails_the_task(
    repo: Path, sessions_dir: Path
) -> None:
    # The user trial's gemma: each round the same write_file of the same content (it
    # succeeds, but it is nothing new) and four identical failing calls.
    seeded = seed_session(sessions_dir, repo, TASKS[:1])

    def loop(n: int) -> list[ToolCall]:
        failing = [tool_call("read_file", path=f"missing/{k}.py") for k in range(4)]
        return [tool_call("write_file", path="textkit/words.py", content="x = 1\n"), *failing]

    with FakeServer(Script(Interleaved(10, loop))) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url))
        asked = worker_requests(server)
    output = result.stdout + result.stderr
    assert result.returncode == 3, output
    failed = seeded.events("task_failed")[0].payload
    assert (failed["reason"], failed["count"]) == ("repeated_calls", 3)
    implementing = [body for body in asked if "submit_case" in json.dumps(body["tools"])]
    assert len(implementing) == 3, "stopped on the third round, as before"
