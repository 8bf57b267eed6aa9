"""The package surface: everything importable, and ``openai`` only loaded when needed."""

from __future__ import annotations

import subprocess
import sys

import tilth.model


def test_public_names_resolve() -> None:
    for name in tilth.model.__all__:
        assert getattr(tilth.model, name) is not None


def test_scripted_use_does_not_import_the_openai_sdk() -> None:
    code = (
        "import sys, tilth.model as m\n"
        "m.ScriptedModel(m.Script([m.reply('x')])).complete([], [])\n"
        "loaded_early = 'openai' in sys.modules\n"
        "m.OpenAIModel\n"
        "print(loaded_early, 'openai' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.split() == ["False", "True"]
