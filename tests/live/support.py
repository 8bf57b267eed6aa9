"""Helpers of the live tier: a small project, ``tilth`` as a real process, checks on the wire."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.live.proxy import Exchange, RecordingProxy

ARGUMENTS_REFUSED = "Failed to parse tool call arguments"
"""llama.cpp's HTTP 500 for a history holding a tool call whose arguments are not JSON."""
CONTEXT_REFUSED = "exceed_context_size_error"
"""The ``type`` of llama.cpp's HTTP 400 for a request larger than the context window."""
MODEL = "gemma3-270m"


def project(root: Path) -> Path:
    """A small directory to chat in."""
    work = root / "work"
    work.mkdir(parents=True)
    (work / "README.md").write_text("# greet\nA tiny package that greets people.\n")
    (work / "app.py").write_text("def hello():\n    return 'hi'\n")
    return work


def live_env(home: Path, base_url: str, reply_tokens: int, **extra: str) -> dict[str, str]:
    """The environment of a ``tilth`` process with every role aimed at ``base_url``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILTH_")}
    env.update(
        {
            "TILTH_HOME": str(home),
            "TILTH_BASE_URL": base_url,
            "TILTH_API_KEY": "live-key",
            "TILTH_WORKER_MODEL": MODEL,
            "TILTH_EVALUATOR_MODEL": MODEL,
            "TILTH_PREP_MODEL": MODEL,
            "TILTH_MAX_REPLY_TOKENS": str(reply_tokens),
            "TILTH_MODEL_TIMEOUT_SECONDS": "300",
            "TILTH_MODEL_MAX_RETRIES": "1",
            "TILTH_MODEL_BACKOFF_SECONDS": "0.2",
            # The seed tests need no plugins; loading the venv's costs seconds a gate.
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PROMPT_TOOLKIT_NO_CPR": "1",
            "NO_COLOR": "1",
        }
    )
    env.update(extra)
    return env


def tilth(
    args: list[str], env: dict[str, str], cwd: Path, stdin: str = "", timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """``python -m tilth ARGS`` as a real process, stdin a pipe."""
    return subprocess.run(
        [sys.executable, "-m", "tilth", *args],
        input=stdin,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def last_user_text(exchange: Exchange) -> str:
    """The last user message of a completion request."""
    messages = exchange.body.get("messages") or []
    for message in reversed(messages):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


def sent_tool_calls(exchanges: list[Exchange]) -> list[dict[str, Any]]:
    """Every tool call the requests carried in their history."""
    return [
        call
        for exchange in exchanges
        for message in exchange.body.get("messages") or []
        for call in message.get("tool_calls") or []
    ]


def check_requests(proxy: RecordingProxy, reply_tokens: int) -> list[Exchange]:
    """What Tilth guarantees on the wire, for every completion request it sent.

    Each carries ``max_tokens`` no larger than the setting; none was refused for the tool-call
    arguments in its history; every tool call in a history has a JSON object as arguments.
    """
    proxy.recording.settle()
    exchanges = proxy.recording.completions()
    assert exchanges, "no completion request reached the server"
    for exchange in exchanges:
        limit = exchange.body.get("max_tokens") or exchange.body.get("max_completion_tokens")
        assert isinstance(limit, int) and 0 < limit <= reply_tokens, exchange.body.keys()
        assert ARGUMENTS_REFUSED not in exchange.answer_text(), exchange.answer_text()[:300]
    for call in sent_tool_calls(exchanges):
        arguments = call["function"]["arguments"]
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        assert isinstance(parsed, dict), call
    return exchanges
