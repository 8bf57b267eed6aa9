"""How a run ends on a misbehaving model (SPEC §12): each stop names its cause and never
advises a command that would only meet it again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.support import TASKS, model_env, recipes, seed_session, tilth, worker_requests
from tilth.demo.script import EVALUATOR, WORKER, Team
from tilth.model import FakeServer, Script, error, reply, stall
from tilth.model.fake_server import LlamaManners
from tilth.model.script import Reply


def test_the_wall_clock_cap_holds_inside_a_turn(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    # The reply starts streaming, then goes silent far past the cap (and within the timeout).
    slow = stall(600, reply("a plan that never arrives"), after=2)
    with FakeServer(Script({WORKER: [slow], EVALUATOR: []})) as server:
        env = model_env(server.base_url, TILTH_MAX_WALL_CLOCK_MINUTES="0.15")
        result = tilth("run", str(repo), env=env)
        asked = len(worker_requests(server))
    assert asked == 1, "the cap was reached while the first reply streamed"
    assert result.returncode == 3, result.stdout + result.stderr
    assert seeded.stops() == ["wall_clock"]
    assert seeded.events("model_call_cancelled")[0].payload["reason"] == "wall_clock"
    assert not [e for e in seeded.events("model_call") if e.payload.get("actor") == "worker"]
    assert "wall clock cap reached mid-reply" in result.stdout + result.stderr


def test_an_evaluator_that_never_gives_a_verdict_stops_the_task_naming_it(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    team = Team(recipes())

    def story(model: str, request: dict[str, Any]) -> Reply:
        tools = {t["function"]["name"] for t in request.get("tools") or []}
        if "submit_verdict" in tools:
            return reply("The work looks fine to me, I think.")
        return team(model, request)

    with FakeServer(Script(story)) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url))
    output = result.stdout + result.stderr
    assert result.returncode == 3, output
    failed = seeded.events("task_failed")[0].payload
    assert failed["reason"] == "evaluator_silent"
    stop = seeded.events("stop")[-1].payload
    assert stop["reason"] == "evaluator_cap" and "the evaluator" in stop["detail"]
    assert "without a usable submit_verdict call" in stop["detail"]
    assert "iter_cap" not in output
    assert "next      set a stronger TILTH_EVALUATOR_MODEL" in output


def test_a_thread_too_long_for_any_summary_stops_without_advising_resume(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    tiny = LlamaManners(n_ctx=500, supports_tools=True, count_prompt_tokens=True)
    with FakeServer(Script(Team(recipes())), manners=tiny) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url))
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    # Refused once; summarizing cannot help when the brief alone does not fit: said once.
    said = "error: the model's context window (500 tokens) is too small"
    assert len([line for line in output.splitlines() if line.startswith(said)]) == 1, output
    assert f"tilth resume {seeded.session.id}" not in output
    assert "serve the model with a larger context window" in output
    assert seeded.events("context_too_small") and not seeded.events("summarize")


def test_a_server_error_is_not_blamed_on_the_url_nor_retried_when_it_repeats(
    repo: Path, sessions_dir: Path
) -> None:
    seed_session(sessions_dir, repo, TASKS[:1])
    failure = error(500, "Failed to parse tool call arguments as JSON")
    with FakeServer(Script({WORKER: [failure] * 5, EVALUATOR: []})) as server:
        env = model_env(server.base_url, TILTH_MODEL_MAX_RETRIES="4")
        result = tilth("run", str(repo), env=env)
        asked = len(worker_requests(server))
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert asked == 2
    assert "HTTP 500: Failed to parse tool call arguments as JSON" in output
    assert "the same request drew the same answer, so it was not retried" in output
    assert "server failed on this request" in output
    assert "check TILTH_BASE_URL" not in output
    assert "retry 1" in output, "the one retry is shown"
