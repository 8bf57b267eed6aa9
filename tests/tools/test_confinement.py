"""No tool reads, lists or writes anything outside the workspace, however the path is spelled."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tilth.tools import ToolBox

SECRET = "TOP-SECRET-OUTSIDE"


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    """``tmp/outside/secret.txt`` next to ``tmp/ws`` (the workspace) with links pointing out."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "inside.txt").write_text("hello inside\n")
    os.symlink(outside / "secret.txt", ws / "link_file.txt")
    os.symlink(outside, ws / "link_dir")
    return ws


ESCAPES: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": "../outside/secret.txt"}),
    ("read_file", {"path": "{outside}/secret.txt"}),
    ("read_file", {"path": "link_file.txt"}),
    ("read_file", {"path": "link_dir/secret.txt"}),
    ("write_file", {"path": "../outside/new.txt", "content": "x"}),
    ("write_file", {"path": "{outside}/new.txt", "content": "x"}),
    ("write_file", {"path": "link_file.txt", "content": "x"}),
    ("write_file", {"path": "link_dir/new.txt", "content": "x"}),
    ("edit_file", {"path": "../outside/secret.txt", "old_string": "TOP", "new_string": "x"}),
    ("edit_file", {"path": "{outside}/secret.txt", "old_string": "TOP", "new_string": "x"}),
    ("edit_file", {"path": "link_file.txt", "old_string": "TOP", "new_string": "x"}),
    ("edit_file", {"path": "link_dir/secret.txt", "old_string": "TOP", "new_string": "x"}),
    ("glob", {"pattern": "../*"}),
    ("glob", {"pattern": "../**/*"}),
    ("glob", {"pattern": "{outside}/*"}),
    ("grep", {"pattern": "SECRET", "path_glob": "../**"}),
    ("grep", {"pattern": "SECRET", "path_glob": "../outside/*"}),
    ("grep", {"pattern": "SECRET", "path_glob": "{outside}/*"}),
]


@pytest.mark.parametrize(("tool", "args"), ESCAPES)
def test_escape_attempts_are_refused(layout: Path, tool: str, args: dict[str, Any]) -> None:
    outside = layout.parent / "outside"
    filled = {k: v.replace("{outside}", str(outside)) for k, v in args.items()}
    outcome = ToolBox(layout).dispatch(tool, filled)
    assert outcome.is_error
    assert "path escapes the workspace" in outcome.result
    assert SECRET not in outcome.result
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == f"{SECRET}\n"


@pytest.mark.parametrize("args", [{"pattern": "**/*"}, {"pattern": "*"}, {"pattern": "link_dir/*"}])
def test_glob_never_lists_through_links(layout: Path, args: dict[str, str]) -> None:
    outcome = ToolBox(layout).dispatch("glob", args)
    assert not outcome.is_error
    assert "secret" not in outcome.result
    assert "link_file.txt" not in outcome.result


@pytest.mark.parametrize("path_glob", [None, "**/*", "link_dir/*", "link_file.txt"])
def test_grep_never_reads_through_links(layout: Path, path_glob: str | None) -> None:
    args = {"pattern": "SECRET|hello"}
    if path_glob:
        args["path_glob"] = path_glob
    outcome = ToolBox(layout).dispatch("grep", args)
    assert SECRET not in outcome.result


def test_absolute_path_inside_is_fine(layout: Path) -> None:
    box = ToolBox(layout)
    assert (
        box.dispatch("read_file", {"path": str(layout / "inside.txt")}).result == "hello inside\n"
    )
    assert box.dispatch("glob", {"pattern": f"{layout}/*.txt"}).result == "inside.txt"


def test_dotdot_that_stays_inside_is_fine(layout: Path) -> None:
    (layout / "sub").mkdir()
    outcome = ToolBox(layout).dispatch("read_file", {"path": "sub/../inside.txt"})
    assert outcome.result == "hello inside\n"


def test_link_pointing_inside_is_followed_for_read(layout: Path) -> None:
    os.symlink(layout / "inside.txt", layout / "alias.txt")
    outcome = ToolBox(layout).dispatch("read_file", {"path": "alias.txt"})
    assert outcome.result == "hello inside\n"


def test_search_skips_tool_and_vcs_directories(tmp_path: Path) -> None:
    for skipped in (
        ".git",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".tilth",
    ):
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "hit.txt").write_text("needle\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "hit.txt").write_text("needle\n")
    box = ToolBox(tmp_path)
    assert box.dispatch("glob", {"pattern": "**/hit.txt"}).result == "src/hit.txt"
    assert box.dispatch("grep", {"pattern": "needle"}).result == "src/hit.txt:1: needle"
