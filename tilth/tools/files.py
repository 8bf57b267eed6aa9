"""``read_file``, ``write_file`` and ``edit_file``: text files inside the workspace."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from tilth.errors import ToolError
from tilth.stops import ALL_STOPS
from tilth.tools.base import Param, Tool, ToolContext
from tilth.tools.near_match import whitespace_hint
from tilth.tools.paths import Workspace

READ_CAP = 50_000
WRITE_CAP = 200_000

PATH_PARAM = Param(
    "path", "string", "File path relative to the workspace root (or absolute inside it)."
)


READ_BYTES = 10_000_000
"""At most this much of a file is read into Tilth's memory (a sparse file the worker made
can be any size); ``edit_file`` refuses bigger files."""


def _read_text(workspace: Workspace, path: Path) -> tuple[str, int]:
    """The text of (the first ``READ_BYTES`` of) the file, and its size in bytes."""
    fd = workspace.open(path)
    with open(fd, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        data = handle.read(READ_BYTES)
    if b"\x00" in data[:8192]:
        raise ToolError(
            f"{workspace.relative(path)} looks like a binary file ({size} bytes); not shown"
        )
    return data.decode("utf-8", errors="replace"), size


def _write_text(workspace: Workspace, path: Path, text: str) -> None:
    """Replace the file's content, through a descriptor checked to lie inside.

    A stop (Ctrl-C, SIGTERM) waits until the write is done: landing between the truncation
    and the write it left the file empty or half written, and a resumed run answers such a
    call "may have partly happened", so the model found its file destroyed.
    """
    data = text.encode("utf-8")
    fd = workspace.open(path, os.O_WRONLY, create=True)
    with open(fd, "wb") as handle:
        held = signal.pthread_sigmask(signal.SIG_BLOCK, ALL_STOPS)
        try:
            handle.truncate(0)
            handle.write(data)
            handle.flush()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)


def read_file(ctx: ToolContext, args: dict[str, Any]) -> str:
    """The file's text, capped at ``READ_CAP`` characters."""
    path = ctx.workspace.resolve(args["path"])
    text, size = _read_text(ctx.workspace, path)
    if size > READ_BYTES:
        return text[:READ_CAP] + f"\n... [truncated: the file is {size} bytes]"
    if len(text) > READ_CAP:
        return text[:READ_CAP] + f"\n... [truncated, {len(text)} chars total]"
    return text


def write_file(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Create or overwrite the file (parents created)."""
    path = ctx.workspace.resolve(args["path"])
    content: str = args["content"]
    shown = ctx.workspace.relative(path)
    if len(content) > WRITE_CAP:
        raise ToolError(
            f"content is {len(content)} chars, over the {WRITE_CAP} limit; split the work "
            "into several smaller files or edits"
        )
    if path.is_dir():
        raise ToolError(f"{shown} is a directory")
    _write_text(ctx.workspace, path, content)
    return f"wrote {len(content)} chars to {shown}"


def edit_file(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Replace exactly one occurrence of ``old_string`` with ``new_string``."""
    path = ctx.workspace.resolve(args["path"])
    old: str = args["old_string"]
    new: str = args["new_string"]
    shown = ctx.workspace.relative(path)
    if not old:
        raise ToolError("'old_string' must not be empty; use write_file to create a file")
    if old == new:
        raise ToolError("'old_string' and 'new_string' are identical; nothing would change")
    text, size = _read_text(ctx.workspace, path)
    if size > READ_BYTES:
        raise ToolError(
            f"{shown} is {size} bytes, too large for edit_file (the limit is {READ_BYTES}); "
            "change it with a command in bash"
        )
    count = text.count(old)
    if count == 0:
        hint = whitespace_hint(text, old)
        if hint:
            raise ToolError(f"old_string not found in {shown} as written{hint}")
        raise ToolError(
            f"old_string not found in {shown}; read the file and copy the exact text, "
            "including whitespace"
        )
    if count > 1:
        raise ToolError(
            f"old_string matches {count} places in {shown}; include more surrounding lines "
            "so it matches exactly one"
        )
    _write_text(ctx.workspace, path, text.replace(old, new, 1))
    return f"edited {shown} (-{len(old)} +{len(new)} chars)"


def _writes_path(workspace: Workspace, args: dict[str, Any]) -> list[Path]:
    path = workspace.resolve(args["path"])
    # A worktree's .git is a pointer file: rewriting it would send the harness's commits
    # to another repository.
    if ".git" in path.relative_to(workspace.root).parts:
        raise ToolError(
            f"refusing to write inside .git ({args['path']}); change the repository with git "
            "commands instead"
        )
    return [path]


TOOLS = (
    Tool(
        "read_file",
        f"Read a UTF-8 text file from the workspace. Output over {READ_CAP} characters is "
        "truncated.",
        (PATH_PARAM,),
        read_file,
    ),
    Tool(
        "write_file",
        "Create a file, or replace its whole content. Parent directories are created. "
        f"At most {WRITE_CAP} characters; prefer edit_file for small changes to existing files.",
        (
            PATH_PARAM,
            Param(
                "content", "string", "The complete new content (an empty string for an empty file)."
            ),
        ),
        write_file,
        writes=_writes_path,
    ),
    Tool(
        "edit_file",
        "Replace one exact occurrence of old_string with new_string in an existing file. "
        "old_string must match exactly once (whitespace included); add surrounding lines to "
        "make it unique.",
        (
            PATH_PARAM,
            Param("old_string", "string", "The exact text to replace; must occur exactly once."),
            Param("new_string", "string", "The replacement text (may be empty to delete)."),
        ),
        edit_file,
        writes=_writes_path,
    ),
)
