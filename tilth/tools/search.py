"""``glob`` and ``grep``: finding files and lines without leaving the workspace."""

from __future__ import annotations

import re
from typing import Any

from tilth.errors import ToolError
from tilth.tools.base import Param, Tool, ToolContext

RESULT_CAP = 200
LINE_CAP = 400
GREP_FILE_CAP = 2_000_000  # bytes; bigger files are almost never source


def glob(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Workspace files matching the pattern, sorted, one per line."""
    matcher = ctx.workspace.pattern(args["pattern"])
    hits: list[str] = []
    for rel, _ in ctx.workspace.files():
        if matcher.match(rel):
            hits.append(rel)
            if len(hits) > RESULT_CAP:
                break
    if not hits:
        return "(no matches)"
    if len(hits) > RESULT_CAP:
        return "\n".join(hits[:RESULT_CAP]) + f"\n... [stopped at {RESULT_CAP} files]"
    return "\n".join(hits)


def grep(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Lines matching a Python regex as ``path:line: text``."""
    raw = args["pattern"]
    if not raw:
        raise ToolError("'pattern' must be a non-empty regular expression")
    try:
        regex = re.compile(raw)
    except re.error as exc:
        raise ToolError(f"invalid regular expression {raw!r}: {exc}") from None
    path_glob = args.get("path_glob") or "**/*"
    matcher = ctx.workspace.pattern(path_glob, field="path_glob")
    hits: list[str] = []
    for rel, path in ctx.workspace.files():
        if not matcher.match(rel):
            continue
        try:
            if path.stat().st_size > GREP_FILE_CAP:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        if b"\x00" in data[:8192]:
            continue
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line):
                text = line.rstrip()
                if len(text) > LINE_CAP:
                    text = text[:LINE_CAP] + " …"
                hits.append(f"{rel}:{number}: {text}")
                if len(hits) >= RESULT_CAP:
                    return "\n".join(hits) + f"\n... [stopped at {RESULT_CAP} matches]"
    return "\n".join(hits) if hits else "(no matches)"


TOOLS = (
    Tool(
        "glob",
        "List workspace files matching a glob pattern relative to the workspace root, e.g. "
        "'**/*.py' (any depth) or 'src/*.ts'. Files only, sorted, at most "
        f"{RESULT_CAP}; .git, virtualenvs, node_modules and caches are skipped.",
        (Param("pattern", "string", "Glob pattern relative to the workspace root."),),
        glob,
    ),
    Tool(
        "grep",
        "Search workspace files for lines matching a Python regular expression. Returns "
        f"'path:line: text', at most {RESULT_CAP} matches.",
        (
            Param("pattern", "string", "Python regular expression (re.search per line)."),
            Param(
                "path_glob",
                "string",
                "Only search files matching this glob, e.g. 'src/**/*.py' (default: all files).",
                required=False,
            ),
        ),
        grep,
    ),
)
