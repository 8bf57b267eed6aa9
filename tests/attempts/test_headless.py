"""A library run needs no terminal (SPEC §10): ``tilth.run`` with progress sinks alone loads
no terminal, CLI or web module (``tilth.library`` used to import the terminal's ``IO``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.agent.support import TASKS, seed_session

PROGRAM = """
import sys
import tilth
from tests.agent.support import recipes
from tilth.demo.script import Team

session = tilth.open_session(sys.argv[1])
script = tilth.Script(Team(recipes()))
stop = tilth.run(
    session,
    worker=tilth.ScriptedModel(script, "worker"),
    evaluator=tilth.ScriptedModel(script, "evaluator"),
    progress=tilth.ProgressLog(),
    on_notice=lambda line: None,
)
# chat.html's writer (tilth.ui.visualize.page) is the CLI's to hand in: a library run loads no ui.
terminal = ("tilth.ui", "tilth.cli", "tilth.web")
front = sorted(m for m in sys.modules if m.startswith(terminal))
print(stop.reason, front)
"""


def test_a_library_run_loads_no_front_end(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    env = {**os.environ, "TILTH_SANDBOX": "off", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, seeded.session.id],
        env={**env, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "all_done"
    assert result.stdout.strip().endswith("[]"), result.stdout


def test_the_durable_queue_is_imported_only_when_used() -> None:
    """``tilth --help`` and a plain run's modules never import DBOS (its import is slow)."""
    root = Path(__file__).resolve().parents[2]
    probe = (
        "import sys, tilth, tilth.library, tilth.runner, tilth.cli, tilth.attempts.parallel; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dbos', 'sqlalchemy')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=root
    )
    assert loaded.stdout.strip() == "[]", loaded.stdout + loaded.stderr
    helped = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tilth", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=root,
    )
    assert helped.returncode == 0
    assert "dbos" not in helped.stderr
