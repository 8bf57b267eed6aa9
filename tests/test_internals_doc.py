"""docs/internals.md draws the layout as it is: every package and top-level module, and
every module of the folders it lists file by file (the timeline, chat, web)."""

from __future__ import annotations

import re
from pathlib import Path

import tilth

PACKAGE = Path(tilth.__file__).parent
DOC = PACKAGE.parent / "docs" / "internals.md"


def _layout() -> str:
    text = DOC.read_text("utf-8")
    block = text.split("## The layout", 1)[1].split("```", 2)[1]
    assert block.startswith("\ntilth/")
    return block


def _named(layout: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", layout) is not None


def test_every_package_and_top_level_module_is_drawn() -> None:
    layout = _layout()
    entries = [
        f"{p.name}/" if p.is_dir() else p.name
        for p in PACKAGE.iterdir()
        if not p.name.startswith("__pycache__")
        and (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").is_file()))
    ]
    assert len(entries) > 15
    assert sorted(e for e in entries if not _named(layout, e.rstrip("/"))) == []


def test_the_folders_drawn_file_by_file_list_every_module() -> None:
    layout = _layout()
    missing = []
    for folder in ("timeline", "timeline/record", "timeline/rewind", "chat", "web"):
        for path in sorted((PACKAGE / folder).glob("*.py")):
            if path.name != "__init__.py" and not _named(layout, path.name):
                missing.append(f"{folder}/{path.name}")
    assert missing == []
