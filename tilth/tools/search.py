"""``glob`` and ``grep``: finding files and lines without leaving the workspace."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from tilth import proc
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


GREP_SECONDS = 20.0
"""How long one grep may match. A pattern such as ``(a*)*b`` backtracks for minutes on a
short line, and Python's regular expressions cannot be interrupted: the matching runs in
a child process that is killed at this limit."""

_MATCHER = """
import json, os, re, stat, sys
job = json.load(sys.stdin)
regex, hits, root = re.compile(job["pattern"]), [], job["root"].rstrip("/") + "/"
for rel, path in job["files"]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        continue
    with open(fd, "rb") as handle:
        # Checked on the open file: a name swapped for a link or a hard link is skipped.
        info = os.fstat(fd)
        real = os.readlink(f"/proc/self/fd/{fd}") if os.path.isdir("/proc/self/fd") else root
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1 or not real.startswith(root):
            continue
        data = handle.read()
    if b"\\0" in data[:8192]:
        continue
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if regex.search(line):
            text = line.rstrip()
            if len(text) > job["line_cap"]:
                text = text[: job["line_cap"]] + " \\u2026"
            hits.append(f"{rel}:{number}: {text}")
            if len(hits) >= job["cap"]:
                break
    if len(hits) >= job["cap"]:
        break
json.dump(hits, sys.stdout)
"""


def grep(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Lines matching a Python regex as ``path:line: text``."""
    raw = args["pattern"]
    if not raw:
        raise ToolError("'pattern' must be a non-empty regular expression")
    try:
        re.compile(raw)
    except re.error as exc:
        raise ToolError(f"invalid regular expression {raw!r}: {exc}") from None
    path_glob = args.get("path_glob") or "**/*"
    matcher = ctx.workspace.pattern(path_glob, field="path_glob")
    files: list[tuple[str, str]] = []
    for rel, path in ctx.workspace.files():
        if not matcher.match(rel):
            continue
        try:
            if path.stat().st_size > GREP_FILE_CAP:
                continue
        except OSError:
            continue
        files.append((rel, str(path)))
    hits = _match(raw, files, ctx.workspace.root)
    if len(hits) >= RESULT_CAP:
        return "\n".join(hits) + f"\n... [stopped at {RESULT_CAP} matches]"
    return "\n".join(hits) if hits else "(no matches)"


def _match(pattern: str, files: list[tuple[str, str]], cwd: Path) -> list[str]:
    """The matching lines, found by a child process (see ``GREP_SECONDS``)."""
    job = {
        "pattern": pattern,
        "files": files,
        "cap": RESULT_CAP,
        "line_cap": LINE_CAP,
        "root": str(cwd),
    }
    # -I -S: the standard library only, nothing from the workspace or site-packages.
    result = proc.run(
        [sys.executable, "-I", "-S", "-c", _MATCHER],
        cwd=cwd,
        timeout=GREP_SECONDS,
        input_text=json.dumps(job),
    )
    if result.timed_out:
        raise ToolError(
            f"grep stopped after {GREP_SECONDS:g}s: the pattern {pattern!r} takes too long to "
            "match (nested repeats such as (a*)* backtrack without end); simplify it"
        )
    try:
        hits = json.loads(result.stdout)
    except ValueError:
        why = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
        raise ToolError(f"grep failed: {why}") from None
    return [str(hit) for hit in hits]


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
