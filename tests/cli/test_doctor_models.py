"""``tilth doctor`` on what an endpoint says of its models: listed or not, tool support, window."""

from __future__ import annotations

import json
from pathlib import Path

from agent.support import tilth

from tilth.model import FakeServer, Script
from tilth.model.fake_server import LlamaManners

KEY = "sk-doctor-models-5b1e"


def env_for(server: FakeServer, **extra: str) -> dict[str, str]:
    return {
        "TILTH_BASE_URL": server.base_url,
        "TILTH_API_KEY": KEY,
        "TILTH_WORKER_MODEL": "worker-m",
        "TILTH_EVALUATOR_MODEL": "judge-m",
        **extra,
    }


def checks_of(stdout: str) -> dict[str, dict[str, object]]:
    return {row["name"]: row for row in json.loads(stdout)["checks"]}


def test_a_model_the_endpoint_does_not_list_is_a_cross(repo: Path, tilth_home: Path) -> None:
    manners = LlamaManners(unlisted=("judge-m",))
    with FakeServer(Script({"worker-m": [], "judge-m": []}), manners=manners) as server:
        table = tilth("doctor", str(repo), env=env_for(server))
        as_json = tilth("doctor", str(repo), "--json", env=env_for(server))
    checks = checks_of(as_json.stdout)
    judge = checks["evaluator model"]
    assert judge["ok"] is False and judge["required"] is True
    assert "judge-m is not one of them (worker-m)" in str(judge["detail"])
    assert judge["fix"] == "check TILTH_EVALUATOR_MODEL: the endpoint does not serve judge-m"
    assert checks["worker model"]["ok"] is True
    assert table.returncode == 1, "an unlisted model means a run could not start"
    assert "✗" in table.stdout and "judge-m is not one of them" in table.stdout
    assert "ready: a real run could start" not in table.stdout


def test_a_server_without_tool_support_is_a_warning_and_its_window_shown(
    repo: Path, tilth_home: Path
) -> None:
    manners = LlamaManners(n_ctx=8192, supports_tools=False)
    with FakeServer(Script({"worker-m": [], "judge-m": []}), manners=manners) as server:
        as_json = tilth("doctor", str(repo), "--json", env=env_for(server))
        table = tilth("doctor", str(repo), env=env_for(server))
        asked = [probe["path"] for probe in server.probes]
    checks = checks_of(as_json.stdout)
    worker = checks["worker model"]
    assert worker["ok"] is True
    assert "context 8,192 tokens (/props n_ctx)" in str(worker["detail"])
    tools = checks["worker tools"]
    assert tools["ok"] is False and tools["required"] is False
    assert "supports_tools is false" in str(tools["detail"])
    assert "--jinja" in str(tools["fix"])
    assert as_json.returncode == 0, "a warning does not stop a run"
    assert "cannot take tool calls" in table.stdout
    assert asked.count("/props") == 2, "one /props per endpoint and run, not per role"


def test_the_window_comes_from_models_metadata_or_the_setting(repo: Path, tilth_home: Path) -> None:
    with FakeServer(Script({"worker-m": [], "judge-m": []})) as server:
        plain = checks_of(tilth("doctor", str(repo), "--json", env=env_for(server)).stdout)
        told = checks_of(
            tilth(
                "doctor", str(repo), "--json", env=env_for(server, TILTH_CONTEXT_TOKENS="6000")
            ).stdout
        )
    assert "context window unknown: 32,768 assumed" in str(plain["worker model"]["detail"])
    assert "context 6,000 tokens (TILTH_CONTEXT_TOKENS)" in str(told["worker model"]["detail"])
    assert "worker tools" not in plain, "no /props: nothing said about tools"


def test_a_window_too_small_for_tilths_own_prompts_is_a_warning(
    repo: Path, tilth_home: Path
) -> None:
    manners = LlamaManners(n_ctx=2048, supports_tools=True)
    with FakeServer(Script({"worker-m": [], "judge-m": []}), manners=manners) as server:
        small = checks_of(tilth("doctor", str(repo), "--json", env=env_for(server)).stdout)
    row = small["worker context"]
    assert row["ok"] is False and row["required"] is False
    assert "2,048-token window is too small" in str(row["detail"])
    assert "-c 8192" in str(row["fix"])
    manners = LlamaManners(n_ctx=8192, supports_tools=True)
    with FakeServer(Script({"worker-m": [], "judge-m": []}), manners=manners) as server:
        roomy = checks_of(tilth("doctor", str(repo), "--json", env=env_for(server)).stdout)
    assert "worker context" not in roomy
