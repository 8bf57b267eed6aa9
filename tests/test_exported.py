"""The library surface is exactly what docs/library.md documents (httpx's habit)."""

from __future__ import annotations

import subprocess
import sys

import tilth

EXPECTED = [
    "__version__",
    "Session",
    "SessionInfo",
    "list_sessions",
    "open_session",
    "find_session",
    "prepare",
    "interview",
    "delete_session",
    "doctor_checks",
    "diagnose_session",
    "repair_session",
    "run",
    "resume",
    "Stop",
    "StopReason",
    "STOP_REASONS",
    "Progress",
    "SilentProgress",
    "ProgressLog",
    "Model",
    "ScriptedModel",
    "Script",
    "open_timeline",
    "TimelineController",
    "ExecuteResult",
    "Checkpoint",
    "RewindPlan",
    "Settings",
    "load_settings",
    "TilthError",
]


def test_all_is_pinned_and_every_name_resolves() -> None:
    assert sorted(tilth.__all__) == sorted(EXPECTED)
    for name in tilth.__all__:
        assert getattr(tilth, name) is not None, name
    assert sorted(dir(tilth)) == sorted(EXPECTED)


def test_import_tilth_stays_light() -> None:
    """``import tilth`` loads nothing heavy: names load on first use (``tilth --help``)."""
    probe = "import sys, tilth; print(sorted(m for m in sys.modules if m.startswith('tilth')))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "['tilth']"


def test_the_cli_reaches_only_the_library_surface_for_the_timeline() -> None:
    """The timeline verbs go through the controller: no planner or executor call of their own."""
    from pathlib import Path

    cli = Path(tilth.__file__).parent / "cli"
    for module in ("timeline.py", "branching.py", "reset.py", "run.py"):
        text = (cli / module).read_text("utf-8")
        assert "timeline.rewind.executor" not in text, module
        assert "timeline.rewind.planner" not in text, module
