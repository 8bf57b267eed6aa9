"""Running without a terminal (SPEC §10): injected models, a progress sink, nothing printed."""

from __future__ import annotations

import os
import shutil
import subprocess
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


def test_the_settings_handed_in_place_the_snapshots_too(
    repo: Path, tilth_home: Path, tmp_path: Path
) -> None:
    """``settings=`` with another TILTH_HOME keeps every file of the session under it: the
    turn snapshots go to that home's store, not to the process environment's."""
    import sys

    from tilth.demo.story import ANSWERS, BRIEF, demo_team, test_command
    from tilth.demo.tour import PROJECT

    other = tmp_path / "other-home"
    settings = tilth.load_settings(
        {
            "TILTH_HOME": str(other),
            "TILTH_TEST_COMMAND": test_command(sys.executable),
            "TILTH_SANDBOX": "off",
        }
    )
    project = tmp_path / "textutils"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "initial"]):
        subprocess.run(["git", *args], cwd=project, check=True)
    script = tilth.Script(demo_team(sys.executable))
    session = tilth.prepare(
        project,
        brief=BRIEF,
        model=tilth.ScriptedModel(script, "interviewer"),
        answers=ANSWERS.split(),
        settings=settings,
    )
    stop = tilth.run(
        session,
        worker=tilth.ScriptedModel(script, "worker"),
        evaluator=tilth.ScriptedModel(script, "evaluator"),
        settings=settings,
    )
    assert stop.reason == "all_done"

    store = (session.dir / "timeline" / "snapshot-store").read_text().strip()
    assert Path(store) == (other / "snapshots").resolve()
    assert any(p.is_file() for p in (other / "snapshots" / "objects").rglob("*"))
    assert not (tilth_home / "snapshots").exists()
