"""No tool reads, lists or writes anything outside the workspace, however the path is spelled."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tilth.errors import ToolError
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


# ---- without a sandbox: hard links and paths swapped after the check --------------------------
@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "linked.txt"}),
        ("write_file", {"path": "linked.txt", "content": "overwritten"}),
        ("edit_file", {"path": "linked.txt", "old_string": "TOP", "new_string": "x"}),
    ],
)
def test_a_hard_link_to_a_file_outside_is_refused(
    layout: Path, tool: str, args: dict[str, str]
) -> None:
    outside = layout.parent / "outside" / "secret.txt"
    os.link(outside, layout / "linked.txt")
    outcome = ToolBox(layout).dispatch(tool, args)
    assert outcome.is_error and "hard link" in outcome.result
    assert SECRET not in outcome.result
    assert outside.read_text() == f"{SECRET}\n"


def test_search_leaves_hard_links_out(layout: Path) -> None:
    os.link(layout.parent / "outside" / "secret.txt", layout / "linked.txt")
    box = ToolBox(layout)
    assert "linked.txt" not in box.dispatch("glob", {"pattern": "*"}).result
    assert SECRET not in box.dispatch("grep", {"pattern": "SECRET"}).result


@pytest.mark.parametrize("mode", ["read", "write"])
def test_a_directory_swapped_for_a_link_after_the_check_is_refused(layout: Path, mode: str) -> None:
    """resolve() saw a real directory; by the time the file is opened it is a link out."""
    box = ToolBox(layout)
    (layout / "d").mkdir()
    (layout / "d" / "secret.txt").write_text("inside\n")
    checked = box.workspace.resolve("d/secret.txt")
    (layout / "d" / "secret.txt").unlink()
    (layout / "d").rmdir()
    os.symlink(layout.parent / "outside", layout / "d")
    flags = os.O_RDONLY if mode == "read" else os.O_WRONLY
    with pytest.raises(ToolError, match="path escapes the workspace"):
        box.workspace.open(checked, flags, create=mode == "write")
    assert (layout.parent / "outside" / "secret.txt").read_text() == f"{SECRET}\n"


def test_a_file_swapped_for_a_link_after_the_check_is_refused(layout: Path) -> None:
    box = ToolBox(layout)
    (layout / "f.txt").write_text("inside\n")
    checked = box.workspace.resolve("f.txt")
    (layout / "f.txt").unlink()
    os.symlink(layout.parent / "outside" / "secret.txt", layout / "f.txt")
    with pytest.raises(ToolError, match="path escapes the workspace"):
        box.workspace.open(checked, os.O_WRONLY, create=True)
    assert (layout.parent / "outside" / "secret.txt").read_text() == f"{SECRET}\n"


def test_devices_and_pipes_are_not_files(layout: Path) -> None:
    os.mkfifo(layout / "pipe")
    outcome = ToolBox(layout).dispatch("read_file", {"path": "pipe"})
    assert outcome.is_error and "not a regular file" in outcome.result
