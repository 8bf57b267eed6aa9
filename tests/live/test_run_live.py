"""``tilth run`` with the real llama.cpp server as worker or evaluator: clear stops, never a jam.

The model cannot be relied on to finish a task, so the tests assert the stop: exactly one,
with a reason from the documented set, the requests all ones the server takes, the caps
holding where the SPEC says (§12).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agent.support import PACKAGE, TASKS, recipes, seed_session, team_server
from tests.conftest import GIT_IDENTITY, make_repo
from tests.live.proxy import RecordingProxy
from tests.live.server import LlamaServer
from tests.live.support import check_requests, live_env, tilth
from tests.sessionview import SessionView
from tilth.demo.script import Team

pytestmark = pytest.mark.timeout(900)

CLEAR_STOPS = {
    "all_done",
    "iter_cap",
    "evaluator_cap",
    "empty_responses",
    "no_case",
    "wall_clock",
    "token_cap",
}
"""The stops a run may end with against a weak model; ``error`` (a jam) is not among them."""
REPLY_TOKENS = 32
"""The real worker's reply limit: its first call is usually cut off in it, and each token
generated costs the server as much as a dozen of the prompt's."""


def seeded(tmp_path: Path) -> tuple[Path, Path]:
    """A prepared session of a small package with one task; (source, sessions dir)."""
    source = make_repo(tmp_path / "source", PACKAGE)
    sessions = tmp_path / "home" / "sessions"
    seed_session(sessions, source, TASKS[:1])
    return source, sessions


def run_env(tmp_path: Path, base_url: str, reply_tokens: int, **extra: str) -> dict[str, str]:
    return {**live_env(tmp_path / "home", base_url, reply_tokens, **extra), **GIT_IDENTITY}


def only_stop(sessions: Path) -> dict[str, object]:
    stops = SessionView.only(sessions).payloads("stop")
    assert len(stops) == 1, stops
    return stops[0]


def test_a_run_against_the_real_worker_ends_in_a_clear_stop(
    proxy: RecordingProxy, tmp_path: Path
) -> None:
    source, sessions = seeded(tmp_path)
    env = run_env(
        tmp_path,
        proxy.base_url,
        REPLY_TOKENS,
        # Two: the second worker turn sends the first's real (often cut-off) calls back.
        TILTH_MAX_ITERATIONS_PER_TASK="2",
        TILTH_MAX_WALL_CLOCK_MINUTES="8",
    )
    result = tilth(["run", str(source)], env, tmp_path)

    stop = only_stop(sessions)
    assert stop["reason"] in CLEAR_STOPS, (stop, result.stderr[-2000:])
    assert result.returncode in (0, 3), result.stderr[-2000:]
    assert str(stop["reason"]) in result.stdout + result.stderr
    check_requests(proxy, REPLY_TOKENS)


def test_the_wall_clock_cap_holds_inside_a_turn(llama: LlamaServer, tmp_path: Path) -> None:
    """A reply still streaming at the deadline is abandoned, not waited for.

    The pass-through hands the real server's stream on one event a second, so a reply of up
    to 256 tokens would take minutes, on any machine, against a 6-second cap (the first
    request goes out about two seconds in, and its prompt is the one the test before sent:
    the server has it cached). (At 64 one reply ended in time: the server sends a tool call's
    tokens a few to an event. A longer limit proves no more: the server generates ahead of the
    paced relay until Tilth lets go, so each token allowed is CPU time spent, as each second of
    cap is the tier's wall time.)
    """
    source, sessions = seeded(tmp_path)
    with RecordingProxy(llama.port, pace=1.0) as slow:
        env = run_env(tmp_path, slow.base_url, 256, TILTH_MAX_WALL_CLOCK_MINUTES="0.1")
        result = tilth(["run", str(source)], env, tmp_path)
        exchanges = check_requests(slow, 256)

    stop = only_stop(sessions)
    assert stop["reason"] == "wall_clock", (stop, result.stderr[-2000:])
    # The reply in flight at the deadline never got to its end: Tilth let go of it.
    assert not exchanges[-1].finish_reasons(), exchanges[-1].answer_text()[-500:]


def test_an_evaluator_without_a_verdict_stops_the_task_naming_the_evaluator(
    llama_plain: LlamaServer, tmp_path: Path
) -> None:
    """A scripted worker does the task; the review goes to a model that never calls a tool.

    Its replies are cut at 8 tokens: the verdict never comes however long they are, and each
    token costs the server more than a hundred of the prompt's."""
    source, sessions = seeded(tmp_path)
    # The reply limit is for the real evaluator: the scripted worker answers whole.
    with (
        team_server(Team(recipes()), honour_max_tokens=False) as worker,
        RecordingProxy(llama_plain.port) as relay,
    ):
        env = run_env(
            tmp_path,
            worker.base_url,
            8,
            TILTH_WORKER_MODEL="worker",
            TILTH_EVALUATOR_BASE_URL=relay.base_url,
            TILTH_MAX_WALL_CLOCK_MINUTES="8",
        )
        result = tilth(["run", str(source)], env, tmp_path)
        check_requests(relay, 8)

    stop = only_stop(sessions)
    assert stop["reason"] != "iter_cap", stop
    assert "evaluator" in json.dumps(stop), stop
    assert "evaluator" in result.stdout + result.stderr
    assert result.returncode == 3, result.stderr[-2000:]
