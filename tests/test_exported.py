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
    assert loaded.strip() == "['tilth', 'tilth.faces']"


def test_every_public_name_loads_no_front_end() -> None:
    """Touching every name of ``tilth.__all__`` loads no ``tilth.ui``, ``tilth.cli`` or
    ``tilth.web`` module: the library stands beneath its front ends (SPEC §10)."""
    probe = (
        "import sys, tilth\n"
        "touched = [getattr(tilth, name) for name in tilth.__all__]\n"
        "front = ('tilth.ui', 'tilth.cli', 'tilth.web')\n"
        "print(len(touched), len([m for m in sys.modules if m.startswith('tilth.')]))\n"
        "print(sorted(m for m in sys.modules if m.startswith(front)))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    touched, modules = map(int, loaded[0].split())
    assert touched == len(EXPECTED) and modules > 30  # the names did load their modules
    assert loaded[1] == "[]"


def test_a_name_missing_from_a_face_is_an_attribute_error() -> None:
    import pytest

    import tilth.session

    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        tilth.nothing_here  # noqa: B018
    with pytest.raises(AttributeError):
        tilth.session.nothing_here  # noqa: B018
    assert tilth.session.Session is tilth.Session
    assert "Session" in dir(tilth.session) and "is_session_id" in tilth.session.__all__


def test_every_face_name_is_an_explicit_re_export() -> None:
    """Each name a face offers is a ``TYPE_CHECKING`` import in ``X as X`` form, so a library
    user's type checker (mypy ``--strict``: no implicit re-exports) sees its real signature."""
    import ast
    from pathlib import Path

    package = Path(tilth.__file__).parent
    faces = [package / "__init__.py", *sorted(package.glob("*/__init__.py"))]
    lazy = [face for face in faces if "lazy_face(" in face.read_text("utf-8")]
    assert len(lazy) >= 9
    for face in lazy:
        tree = ast.parse(face.read_text("utf-8"))
        blocks = [
            n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
        ]
        aliases = [
            a
            for block in blocks
            for n in block.body
            if isinstance(n, ast.ImportFrom)
            for a in n.names
        ]
        assert aliases, face
        assert [a.name for a in aliases if a.asname != a.name] == [], face


def test_every_name_of_every_package_face_resolves() -> None:
    """A face's line naming a module or name that moved fails here, not in a user's hands."""
    import importlib

    for name in (
        "session",
        "timeline",
        "chat",
        "seed",
        "agent",
        "attempts",
        "health",
        "demo",
        "web",
    ):
        face = importlib.import_module(f"tilth.{name}")
        assert face.__all__, name
        for attribute in face.__all__:
            assert getattr(face, attribute) is not None, f"tilth.{name}.{attribute}"
