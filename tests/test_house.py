"""The house stands on its feet: every room imports only rooms on floors below its own.

A room is a folder of ``tilth/`` (``git/``, ``timeline/``…) or a module at its root; the
floors below are the ones ``farm-studio look`` drew when the rooms were made (issue #26).
Every import counts, ``TYPE_CHECKING`` and function-level ones too, read with ``ast``: an
arrow back up, or two rooms of one floor leaning on each other, fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tilth

PACKAGE = Path(tilth.__file__).parent

FLOORS = {
    "__main__": 14,
    "cli": 13,
    "web": 12,
    "ui": 12,
    "__init__": 11,
    "library": 10,
    "runner": 9,
    "attempts": 8,
    "seed": 8,
    "chat": 8,
    "agent": 7,
    "health": 7,
    "timeline": 6,
    "tools": 5,
    "demo": 5,
    "environment": 4,
    "model": 4,
    "session": 3,
    "config": 3,
    "git": 2,
    "proc": 1,
    "stops": 1,
    "safe_read": 1,
    "secret_filter": 1,
    "faces": 1,
    "errors": 1,
}


def room_of(module: str) -> str:
    """``tilth.timeline.rewind.plan`` → ``timeline``; ``tilth`` itself → ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imported(node: ast.AST) -> list[str]:
    """The tilth modules one import statement names (``from tilth import git`` names the
    room ``git``, ``from tilth import run`` the face)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "tilth"]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        if node.module == "tilth":
            return [
                f"tilth.{a.name}" if a.name in FLOORS and a.name != "__init__" else "tilth"
                for a in node.names
            ]
        if node.module.split(".")[0] == "tilth":
            return [node.module]
    return []


def arrows() -> list[tuple[str, str, str]]:
    """(file, its room, the room it imports) for every import of the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if "demo" in rel.parts and "project" in rel.parts:
            continue  # the bundled example project, not Tilth
        room = (
            rel.parts[0].removesuffix(".py")
            if len(rel.parts) > 1 or rel.stem != "__init__"
            else "__init__"
        )
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            for module in imported(node):
                found.append((rel.as_posix(), room, room_of(module)))
    return found


def test_every_room_has_a_floor() -> None:
    rooms = {
        p.stem if p.suffix == ".py" else p.name
        for p in PACKAGE.iterdir()
        if p.suffix == ".py" or p.is_dir()
    }
    rooms = {r for r in rooms if not r.startswith((".", "_")) or r in ("__init__", "__main__")}
    assert rooms - set(FLOORS) == set(), "a new room: give it its floor in FLOORS"


def test_every_import_points_down() -> None:
    found = arrows()
    assert len(found) > 500
    up = [
        f"{file} ({room}, floor {FLOORS[room]}) imports {target} (floor {FLOORS[target]})"
        for file, room, target in found
        if target != room and FLOORS[target] >= FLOORS[room]
    ]
    assert up == []


def test_an_arrow_back_up_is_caught() -> None:
    source = "from tilth.cli import main\nfrom tilth import git\n"
    rooms = [room_of(m) for node in ast.walk(ast.parse(source)) for m in imported(node)]
    assert rooms == ["cli", "git"]
    assert FLOORS["cli"] > FLOORS["session"]  # so session importing the CLI would be flagged
