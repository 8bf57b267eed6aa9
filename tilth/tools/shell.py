"""``bash``: one shell command in the workspace, in its own process group, without secrets."""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilth.errors import ToolError
from tilth.git.pipes import removal_note, remove_named_pipes
from tilth.proc import run_into, scrubbed_env
from tilth.tools.base import Param, Tool, ToolContext
from tilth.tools.launcher import CONTAINED

if TYPE_CHECKING:
    from tilth.tools.sandbox import Sandbox

OUTPUT_CAP = 8_000
_HEAD = 2_000  # the start of long output shows what ran; the rest of the cap goes to the end


def cap_output(text: str, limit: int = OUTPUT_CAP) -> str:
    """``text`` cut to about ``limit`` chars, keeping its head and tail."""
    if len(text) <= limit:
        return text
    tail = limit - _HEAD
    return (
        text[:_HEAD]
        + f"\n... [truncated, {len(text)} chars total] ...\n"
        + text[len(text) - tail :]
    )


def _read_capped(handle: Any) -> str:
    """The captured output, reading at most the head and tail of a huge file."""
    size = os.fstat(handle.fileno()).st_size
    handle.seek(0)
    if size <= OUTPUT_CAP * 4:
        return str(handle.read().decode("utf-8", errors="replace"))
    head = handle.read(_HEAD * 4).decode("utf-8", errors="replace")[:_HEAD]
    handle.seek(size - OUTPUT_CAP * 4)
    tail = handle.read().decode("utf-8", errors="replace")[-(OUTPUT_CAP - _HEAD) :]
    return head + f"\n... [truncated, about {size} bytes total] ...\n" + tail


def _redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if len(secret) >= 6:  # short strings would redact ordinary words
            text = text.replace(secret, "[redacted]")
    return text


def bash(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Run the command; output is stdout+stderr interleaved, capped, then ``[exit N]``."""
    command: str = args["command"]
    if not command.strip():
        raise ToolError("'command' must be a non-empty shell command")
    if "\x00" in command:
        raise ToolError("'command' contains a NUL byte")
    env = scrubbed_env(os.environ, ctx.secrets)
    if ctx.environment is not None:
        env = ctx.environment.activate(env)
    argv = ["/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh", "-c", command]
    launch = CONTAINED  # with or without a sandbox, nothing started outlives the call
    if ctx.sandbox is not None:
        argv, launch = ctx.sandbox.wrap(argv), ctx.sandbox.launcher()
    with tempfile.TemporaryFile() as out:
        code, timed_out = run_into(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ctx.workspace.root,
            timeout=ctx.bash_timeout,
            env=env,
            launch=launch,
        )
        text = _redact(_read_capped(out), ctx.secrets)
    text = cap_output(text)
    removed = remove_named_pipes(ctx.workspace.root) if ctx.remove_pipes else []
    if removed:
        text = text.rstrip("\n") + ("\n" if text.strip() else "") + removal_note(removed) + "\n"
    if timed_out:
        raise ToolError(
            f"command timed out after {ctx.bash_timeout:g}s and was killed with all its "
            f"child processes\n$ {shlex.quote(command)}\n{text}".rstrip()
        )
    body = text if text.endswith("\n") or not text else text + "\n"
    if code != 0 and ctx.sandbox is not None and _refused(text):
        body += _fixed_note(ctx.sandbox, ctx.workspace.root)
    return f"{body}[exit {code}]"


def _refused(text: str) -> bool:
    return "Permission denied" in text or "Operation not permitted" in text


def _fixed_note(sandbox: Sandbox, root: Path) -> str:
    """One line for a refusal the Landlock sandbox's fixed directories may explain (the
    model would otherwise retry the same command); empty where none are fixed."""
    fixed = sandbox.fixed_directories()
    if not fixed:
        return ""
    names = ", ".join(
        "the top directory" if d == root else d.relative_to(root).as_posix() for d in fixed
    )
    return (
        f"[tilth] this sandbox (Landlock: bubblewrap is not installed here) lets bash change "
        f"files in {names} but not create, rename or remove entries directly in it (it holds "
        f"a read-only place such as .git); inside its subdirectories everything works, and "
        f"write_file can create a file there.\n"
    )


def command_of(args: dict[str, Any]) -> str:
    """The shell command a ``bash`` call will run."""
    return str(args["command"])


TOOLS = (
    Tool(
        "bash",
        "Run a shell command (bash) in the workspace root and get its combined stdout and "
        f"stderr (capped at about {OUTPUT_CAP} chars) followed by [exit N]. No stdin; each call "
        "is a fresh shell and background processes are stopped when it returns. Destructive "
        "git and system commands are blocked.",
        (Param("command", "string", "The shell command to run."),),
        bash,
        command=command_of,
    ),
)
