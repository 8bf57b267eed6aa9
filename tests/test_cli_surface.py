"""The library stands beneath its front ends (issue 26), read from the imports (``ast``):

- the front ends — ``tilth/cli/``, ``tilth/web/``, ``tilth/ui/`` — import only faces:
  ``tilth`` and ``tilth.<name>`` (a package's ``__init__``, or a root-level module such as
  ``tilth.git`` or ``tilth.library``), never a module beneath one
  (``tilth.timeline.rewind.seed_reset``); each other's modules are theirs to use;
- a name of ``tilth.__all__`` they take from ``tilth`` itself, so the library's face stands
  below every front end (``farm-studio look`` draws it so);
- nothing else imports a front end (``tilth/__main__.py``, the command's entry, aside).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import tilth

PACKAGE = Path(tilth.__file__).parent
FRONT_ENDS = ("cli", "web", "ui")
ENTRY = "__main__.py"


def is_module(name: str) -> bool:
    """True when ``name`` (``tilth.x.y``) is a module or package of this tree."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or path.is_dir()


def tilth_imports(source: str) -> list[tuple[int, str]]:
    """Each module of ``tilth`` a source imports, with its line (``from tilth.session import
    store`` imports ``tilth.session.store``; ``from tilth import Session``, ``tilth``)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "tilth"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                found.append((node.lineno, "." * node.level + (node.module or "")))
            elif node.module and node.module.split(".")[0] == "tilth":
                for alias in node.names:
                    below = f"{node.module}.{alias.name}"
                    found.append((node.lineno, below if is_module(below) else node.module))
    return found


def in_front_end(module: str) -> bool:
    parts = module.split(".")
    return len(parts) > 1 and parts[0] == "tilth" and parts[1] in FRONT_ENDS


def is_face(module: str) -> bool:
    return module.startswith("tilth") and module.count(".") <= 1


def public_names_taken_elsewhere(source: str) -> list[tuple[int, str]]:
    """``from tilth.session import Session``: a public name taken from a package instead of
    ``tilth`` (root modules such as ``tilth.errors`` and ``tilth.config`` are where the
    names are written; the CLI takes them there to start fast)."""
    return [
        (node.lineno, f"{node.module}.{alias.name}")
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tilth.")
        for alias in node.names
        if alias.name in tilth.__all__
        and not in_front_end(node.module)
        and PACKAGE.parent.joinpath(*node.module.split(".")).is_dir()
    ]


def offences(where: str, source: str) -> list[str]:
    """What the file at ``where`` (relative to ``tilth/``) imports against the face rule."""
    front = where.split("/")[0] in FRONT_ENDS
    found = [
        f"{where}:{line} takes {name} (public: from tilth)"
        for line, name in (public_names_taken_elsewhere(source) if front else [])
    ]
    for line, module in tilth_imports(source):
        if module.startswith("."):
            found.append(f"{where}:{line} imports {module} (relative)")
        elif front and not (is_face(module) or in_front_end(module)):
            found.append(f"{where}:{line} imports {module} (beneath a face)")
        elif not front and where != ENTRY and in_front_end(module):
            found.append(f"{where}:{line} imports {module} (a front end)")
    return found


def sources() -> list[tuple[str, str]]:
    return [
        (path.relative_to(PACKAGE).as_posix(), path.read_text("utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
        if "project" not in path.relative_to(PACKAGE).parts  # the demo's bundled example
    ]


def test_front_ends_import_only_faces_and_nothing_imports_them() -> None:
    files = sources()
    fronts = [where for where, _ in files if where.split("/")[0] in FRONT_ENDS]
    assert len(fronts) > 40 and len(files) > 150
    assert [o for where, text in files for o in offences(where, text)] == []


@pytest.mark.parametrize(
    "line",
    [
        "from tilth.timeline.rewind.seed_reset import CONFIRM_WARNING",
        "from tilth.session.store import Session",
        "import tilth.session.teardown",
        "from tilth.session import store",
        "from tilth.seed.prepare import prepare",
        "from tilth.chat.session import is_chat",
        "from .common import io",
        "from tilth.session import Session",
        "from tilth.timeline import TimelineController",
    ],
)
def test_a_front_end_reaching_beneath_a_face_is_caught(line: str) -> None:
    source = f"def verb() -> None:\n    {line}\n"
    for where in ("cli/reset.py", "web/api.py", "ui/pickers.py"):
        assert len(offences(where, source)) == 1, (where, line)


@pytest.mark.parametrize(
    "line",
    [
        "from tilth.ui.io import IO",
        "import tilth.web.server",
        "from tilth.cli import main",
        "from tilth import cli",
        "from tilth.ui import visualize",
    ],
)
def test_the_library_importing_a_front_end_is_caught(line: str) -> None:
    source = f"def run() -> None:\n    {line}\n"
    for where in ("library.py", "runner.py", "seed/terminal.py", "timeline/rewind/plan.py"):
        assert offences(where, source) == [f"{where}:2 imports {_module(line)} (a front end)"]


def test_faces_and_the_front_ends_themselves_are_allowed() -> None:
    source = (
        "from tilth import Session, TimelineController, git\n"
        "from tilth.library import delete_session\nfrom tilth.ui.io import IO\n"
        "from tilth.errors import UsageError\nfrom tilth.cli.common import io\n"
        "from tilth.timeline import CONFIRM_WARNING\nimport tilth.session\n"
        "from tilth.web import serve\n"
    )
    assert offences("cli/reset.py", source) == []
    assert offences("web/api.py", source) == []
    assert offences(ENTRY, "from tilth.cli import entry\n") == []


def _module(line: str) -> str:
    words = line.split()
    if words[0] == "import":
        return words[1]
    below = f"{words[1]}.{words[3]}"
    return below if is_module(below) else words[1]


def test_every_library_call_the_cli_makes_is_documented() -> None:
    """What the CLI reaches in ``tilth.library`` a library user can find in docs/library.md."""
    doc = (PACKAGE.parent / "docs" / "library.md").read_text("utf-8")
    used: set[str] = set()
    for path in (PACKAGE / "cli").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "tilth.library":
                used.update(alias.name for alias in node.names)
            elif isinstance(node, ast.Attribute) and ast.unparse(node.value) == "library":
                used.add(node.attr)
    calls = {name for name in used if name.islower()}  # types are only named in annotations
    assert len(calls) > 12
    assert sorted(name for name in calls if not re.search(rf"\b{name}\b", doc)) == []
