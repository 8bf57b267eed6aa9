"""How a tool call looks to a person: a one-line summary and, for edit tools, a small diff."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

from tilth.safe_read import read_inside
from tilth.tools import ToolBox, ToolError

EDIT_TOOLS = ("write_file", "edit_file")
DIFF_LINES = 16
_READ_CAP = 512 * 1024
_CAPPED = re.compile(r"\n\.\.\. \[truncated, [^\]\n]*total\] \.\.\.\n")
"""The mark ``bash`` leaves where it cut a long output (``tilth.tools.shell``)."""


def describe_call(name: str, args: dict[str, Any]) -> str:
    """``bash: pytest -q``, ``write_file hello.py (12 lines)``, ``grep 'TODO' in *.py``..."""
    if name == "bash":
        command = str(args.get("command", "")).strip().replace("\n", " ⏎ ")
        return f"bash: {command[:160]}" + ("..." if len(command) > 160 else "")
    if name == "write_file":
        content = args.get("content")
        lines = content.count("\n") + (0 if content.endswith("\n") else 1) if content else 0
        return f"write_file {args.get('path', '?')} ({lines} line{'s' if lines != 1 else ''})"
    if name in ("read_file", "edit_file"):
        return f"{name} {args.get('path', '?')}"
    if name == "glob":
        return f"glob {args.get('pattern', '?')}"
    if name == "grep":
        where = f" in {args['path_glob']}" if args.get("path_glob") else ""
        return f"grep {args.get('pattern', '?')!r}{where}"
    return name


def _target(toolbox: ToolBox, args: dict[str, Any]) -> Path | None:
    try:
        return toolbox.workspace.resolve(args.get("path"))
    except ToolError:
        return None


def _text(root: Path, path: Path) -> str:
    try:
        data = read_inside(root, path.relative_to(root).as_posix(), _READ_CAP + 1)
    except (OSError, ValueError):
        return ""
    return "" if len(data) > _READ_CAP else data.decode("utf-8", errors="replace")


def read_before(toolbox: ToolBox, name: str, args: dict[str, Any]) -> str | None:
    """The text an edit tool is about to replace ("" for a new file); None for other tools."""
    if name not in EDIT_TOOLS:
        return None
    path = _target(toolbox, args)
    return None if path is None else _text(toolbox.workspace.root, path)


def edit_diff(toolbox: ToolBox, args: dict[str, Any], before: str) -> str:
    """A unified diff of what the edit did, cut to ``DIFF_LINES`` changed lines."""
    path = _target(toolbox, args)
    if path is None:
        return ""
    after = _text(toolbox.workspace.root, path)
    shown = toolbox.workspace.relative(path)
    lines = list(
        difflib.unified_diff(
            before.splitlines(),
            after.splitlines(),
            f"a/{shown}" if before else "/dev/null",
            f"b/{shown}",
            n=1,
            lineterm="",
        )
    )
    body = lines[2:]
    if len(body) > DIFF_LINES:
        more = len(body) - DIFF_LINES
        body = [*body[:DIFF_LINES], f"... {more} more diff line{'s' if more != 1 else ''}"]
    return "\n".join(body)


def preview(result: str, limit: int) -> str:
    """``result`` cut to about ``limit`` characters by dropping its middle, on line breaks.

    The head says what ran, the tail how it ended (a ``bash`` result's last lines and its
    ``[exit N]``): a preview keeps both.
    """
    if len(result) <= limit:
        return result
    head = result[: limit // 4]
    head = head[: head.rfind("\n") + 1] or head
    tail = result[-(limit - len(head)) :]
    tail = tail[tail.find("\n") + 1 :] if "\n" in tail[:-1] else tail
    cut = result.count("\n", len(head), len(result) - len(tail))
    return f"{head}... [{cut} line(s) not shown] ...\n{tail}"


def line_count(result: str) -> int | None:
    """How many lines ``result`` has; None when the tool already cut its output."""
    return None if _CAPPED.search(result) else result.count("\n") + 1
