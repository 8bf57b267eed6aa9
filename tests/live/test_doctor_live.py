"""``tilth doctor`` against the real llama.cpp server: tool support and listed models (§12)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.conftest import make_repo
from tests.live.server import LlamaServer
from tests.live.support import live_env, tilth


def doctor(tmp_path: Path, base_url: str, **extra: str) -> tuple[str, list[dict[str, Any]]]:
    repo = make_repo(tmp_path / "repo")
    env = live_env(tmp_path / "home", base_url, 64, **extra)
    # Both at once: each is a second of start-up and waiting on the server.
    with ThreadPoolExecutor(2) as pool:
        shown, as_json = pool.map(
            lambda args: tilth(args, env, tmp_path, timeout=120),
            [["doctor", str(repo)], ["doctor", str(repo), "--json"]],
        )
    return shown.stdout, json.loads(as_json.stdout)["checks"]


def about_tools(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in checks if "tool" in f"{c['name']} {c['detail']} {c.get('fix')}".lower()]


def test_doctor_warns_about_a_server_without_a_tool_template(
    llama_plain: LlamaServer, tmp_path: Path
) -> None:
    shown, checks = doctor(tmp_path, llama_plain.base_url)
    warnings = [c for c in about_tools(checks) if not c["ok"] and not c["required"]]
    assert warnings, checks
    assert any(line.startswith("!") and "tool" in line for line in shown.splitlines()), shown


def test_doctor_marks_a_model_the_server_does_not_list(llama: LlamaServer, tmp_path: Path) -> None:
    shown, checks = doctor(tmp_path, llama.base_url, TILTH_EVALUATOR_MODEL="no-such-model")
    evaluator = [c for c in checks if "evaluator" in c["name"] and "model" in c["name"]]
    assert evaluator and not evaluator[0]["ok"] and evaluator[0]["required"], checks
    assert any(line.startswith("✗") and "evaluator" in line for line in shown.splitlines())
    # The worker's model is listed and the server takes tools: no cross, no tool warning.
    worker = [c for c in checks if "worker" in c["name"] and "model" in c["name"]]
    assert worker and worker[0]["ok"], checks
    assert all(c["ok"] for c in about_tools(checks)), about_tools(checks)
