"""The package surface: everything importable, httpx only loaded when needed, no SDK at all."""

from __future__ import annotations

import json
import subprocess
import sys

import tilth.model

# What the client must never bring along: the official SDK (about 1.5 CPU seconds to import)
# and pydantic, which only the SDK needed (DBOS is imported for attempts and the queue only).
_HEAVY = ("openai", "pydantic", "pydantic_core", "httpx2")

_RUN_PATH = """
import contextlib, io, json, sys
import tilth.model.openai_client, tilth.runner, tilth.agent.loop, tilth.agent.resume
from tilth.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["run", "--help"])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def test_public_names_resolve() -> None:
    for name in tilth.model.__all__:
        assert getattr(tilth.model, name) is not None


def test_scripted_use_does_not_import_the_http_client() -> None:
    code = (
        "import sys, tilth.model as m\n"
        "m.ScriptedModel(m.Script([m.reply('x')])).complete([], [])\n"
        "loaded_early = 'httpx' in sys.modules\n"
        "m.OpenAIModel\n"
        "print(loaded_early, 'httpx' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.split() == ["False", "True"]


def test_the_run_path_imports_neither_the_sdk_nor_pydantic() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _RUN_PATH], capture_output=True, text=True, timeout=60, check=True
    )
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["code"] == 0
    modules = set(found["modules"])
    assert "tilth.model.openai_client" in modules and "httpx" in modules, "the probe is real"
    heavy = sorted(m for m in modules if m.split(".")[0] in _HEAVY)
    assert heavy == [], f"the run path imports {heavy[:5]}"


def test_a_real_run_process_imports_neither() -> None:
    """``python -m tilth run --help`` as its own process, with import tracing on."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tilth", "run", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Usage" in result.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()}
    assert "tilth.cli" in imported, "the trace is real"
    assert not {m for m in imported if m.split(".")[0] in _HEAVY}
