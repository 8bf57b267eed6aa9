"""Where a Python installation's editable installs point (``pip install -e .``).

A ``pip install -e .`` into a virtualenv points at the repository's own files; a session's
worktree has its own copy, which is the one the seed tests and the worker's ``bash`` must
import there. ``tilth.environment.project`` moves what this module finds into the worktree.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tilth.git.refs import small_text

_FINDER_MAPPING = re.compile(r"^MAPPING\b[^=\n]*=\s*(\{.*\})\s*$", re.MULTILINE)


def _read_text(path: Path) -> str:
    # A virtualenv in the worktree: never wait on a FIFO, never read a huge file.
    return small_text(path, 1 << 20) or ""


def _sys_path_entries(site_dir: Path) -> list[Path]:
    """What ``site_dir``'s ``.pth`` files and setuptools' editable finders add to imports."""
    entries: list[Path] = []
    for pth in sorted(site_dir.glob("*.pth")):
        for line in _read_text(pth).splitlines():
            line = line.strip()
            if line and not line.startswith(("#", "import ", "import\t")):
                entries.append(site_dir / line)  # a relative line is relative to site_dir
    # A flat layout's `pip install -e .` maps package names to their directories instead.
    for finder in sorted(site_dir.glob("__editable___*_finder.py")):
        found = _FINDER_MAPPING.search(_read_text(finder))
        try:
            mapping = ast.literal_eval(found.group(1)) if found else {}
        except (ValueError, SyntaxError):
            continue
        if isinstance(mapping, dict):
            entries += [Path(str(p)).parent for p in mapping.values()]
    return entries


def editable_dirs(venv: Path, source: Path) -> list[Path]:
    """Directories of ``source`` (relative to it) that the editable installs of ``venv`` (a
    virtualenv, or an interpreter's prefix) import from."""
    root, own = source.resolve(), venv.resolve()
    found: list[Path] = []
    for site_dir in sorted(venv.glob("lib/python*/site-packages")):
        for entry in _sys_path_entries(site_dir):
            try:
                path = entry.resolve()
            except OSError:
                continue
            if path.is_relative_to(root) and not path.is_relative_to(own):
                relative = path.relative_to(root)
                if relative not in found:
                    found.append(relative)
    return found


def _pytest11_modules(text: str) -> list[str]:
    """Top-level module names of the ``[pytest11]`` entry points in an ``entry_points.txt``."""
    section, found = "", []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section == "pytest11" and "=" in line and not line.startswith(("#", ";")):
            module = line.split("=", 1)[1].split(":", 1)[0].split("[", 1)[0].strip()
            if module:
                found.append(module.split(".", 1)[0])
    return found


def editable_plugins(venv: Path, source: Path, dirs: list[Path]) -> list[tuple[str, Path]]:
    """The pytest plugins registered in ``venv`` whose module lies in one of ``dirs`` (relative
    to ``source``): ``(top-level module name, its directory)``. pytest loads them before any
    test, which makes them the project's own code imported earliest (a plugin project)."""
    found: list[tuple[str, Path]] = []
    for site_dir in sorted(venv.glob("lib/python*/site-packages")):
        for entry_points in sorted(site_dir.glob("*.dist-info/entry_points.txt")):
            for name in _pytest11_modules(_read_text(entry_points)):
                for rel in dirs:
                    where = source / rel
                    if (where / name).is_dir() or (where / f"{name}.py").is_file():
                        if (name, rel) not in found:
                            found.append((name, rel))
                        break
    return found
