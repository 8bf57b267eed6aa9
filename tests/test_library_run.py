"""Running without a terminal (SPEC §10): injected models, a progress sink, nothing printed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import tilth
from tests.agent.support import TASKS, recipes, seed_session
from tilth.demo.script import Team


def _settings() -> tilth.Settings:
    return tilth.load_settings(
        {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "TILTH_SANDBOX": "off"}
    )


def test_a_library_run_prints_nothing_and_a_progress_log_hears_it(
    repo: Path, sessions_dir: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """No terminal needed: the default sink is silent (nothing on stdout or stderr), an
    injected one hears the statuses, and ``on_notice`` gets the lines the CLI would print."""
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    script = tilth.Script(Team(recipes()))
    models = {
        "worker": tilth.ScriptedModel(script, "worker"),
        "evaluator": tilth.ScriptedModel(script, "evaluator"),
    }
    capfd.readouterr()
    assert tilth.run(seeded.session, **models, settings=_settings()).reason == "all_done"
    assert capfd.readouterr() == ("", "")
    again = seed_session(sessions_dir, repo, TASKS[:1])
    log, notices = tilth.ProgressLog(), []
    stop = tilth.run(
        again.session, **models, progress=log, settings=_settings(), on_notice=notices.append
    )
    assert stop.reason == "all_done"
    assert capfd.readouterr() == ("", "")
    assert any(s.get("task") == "T-001" and s.get("stage") for s in log.statuses)
    assert any("all_done" in line for line in notices), notices
