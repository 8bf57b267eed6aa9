"""The CLI is a client of the library surface (issue 11): its modules import only ``tilth``
(names in ``tilth.__all__``), ``tilth.library``, ``tilth.errors``, ``tilth.config``,
``tilth.ui.*`` and ``tilth.cli.*`` — never ``tilth.session``, ``tilth.timeline`` and the like."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import tilth

CLI = Path(tilth.__file__).parent / "cli"

ALLOWED = ("tilth.library", "tilth.errors", "tilth.config", "tilth.ui", "tilth.cli")


def tilth_imports(source: str) -> list[tuple[int, str]]:
    """Each ``tilth`` module (or ``tilth.<name>``) a module's source imports, with its line."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "tilth"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "tilth":
                found += [(node.lineno, f"tilth.{a.name}") for a in node.names]
            elif node.module.split(".")[0] == "tilth":
                found.append((node.lineno, node.module))
    return found


def allowed(module: str) -> bool:
    if module.count(".") == 1 and module.split(".")[1] in tilth.__all__:
        return True  # ``from tilth import Session``
    return any(module == ok or module.startswith(ok + ".") for ok in ALLOWED)


def offences(name: str, source: str) -> list[str]:
    return [
        f"{name}:{line} imports {module}"
        for line, module in tilth_imports(source)
        if not allowed(module)
    ]


def test_the_cli_imports_only_the_library_surface() -> None:
    modules = sorted(CLI.glob("*.py"))
    assert len(modules) > 10
    found = [o for path in modules for o in offences(path.name, path.read_text("utf-8"))]
    assert found == []


@pytest.mark.parametrize(
    "line",
    [
        "from tilth.timeline.rewind.seed_reset import CONFIRM_WARNING",
        "from tilth.session.store import Session",
        "import tilth.session.teardown",
        "from tilth import git",
        "from tilth.seed.prepare import prepare",
        "from tilth.chat.session import is_chat",
    ],
)
def test_an_internal_import_is_caught(line: str) -> None:
    source = f"def verb() -> None:\n    {line}\n"
    assert offences("reset.py", source) == [f"reset.py:2 imports {_module(line)}"]


def _module(line: str) -> str:
    words = line.split()
    if words[0] == "import":
        return words[1]
    return words[1] if words[1] != "tilth" else f"tilth.{words[3]}"


def test_the_surface_itself_is_allowed() -> None:
    source = (
        "from tilth import Session, TimelineController\n"
        "from tilth.library import delete_session\nfrom tilth.ui.io import IO\n"
        "from tilth.errors import UsageError\nfrom tilth.cli.common import io\n"
    )
    assert offences("reset.py", source) == []


def test_every_library_call_the_cli_makes_is_documented() -> None:
    """What the CLI reaches in ``tilth.library`` a library user can find in docs/library.md."""
    doc = (CLI.parents[1] / "docs" / "library.md").read_text("utf-8")
    used: set[str] = set()
    for path in CLI.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "tilth.library":
                used.update(alias.name for alias in node.names)
            elif isinstance(node, ast.Attribute) and ast.unparse(node.value) == "library":
                used.add(node.attr)
    calls = {name for name in used if name.islower()}  # types are only named in annotations
    assert len(calls) > 20
    assert sorted(name for name in calls if not re.search(rf"\b{name}\b", doc)) == []
