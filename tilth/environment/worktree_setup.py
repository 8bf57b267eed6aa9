"""``TILTH_SETUP_COMMAND``: a shell line run once in every new worktree, logged as ``setup``.

It runs before any model call (prep, fork, a worktree that ``run`` re-creates), in the
worktree, without API keys or Tilth's settings in its environment. What it makes must
be gitignored (a worktree-local ``.venv/`` survives ``reset --to-seed``'s ``git clean -fd``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from tilth import proc
from tilth.config import Settings, secret_values
from tilth.environment.worktree_env import record_worktree_env
from tilth.errors import SetupFailed, TilthError
from tilth.git import worktrees as git_worktrees
from tilth.git.pipes import remove_named_pipes
from tilth.proc import scrubbed_env
from tilth.session.store import Session

OUTPUT_CHARS = 8_000


class Confinement(Protocol):
    """How a command is confined (the worker's sandbox, ``tilth.tools.sandbox``, is one)."""

    def wrap(self, argv: Sequence[str]) -> list[str]: ...
    def launcher(self) -> proc.Launch: ...


ConfineIn = Callable[[Path], Confinement | None]
"""The confinement for a command run in a worktree (None: none), handed in by the caller
that knows the sandbox: the set-up stands below the tools that confine it."""


def _tail(text: str, limit: int = OUTPUT_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def prepare_worktree(
    session: Session,
    worktree: Path,
    settings: Settings,
    *,
    why: str,
    confine: ConfineIn | None,
    keep: bool = False,
    on_progress: Callable[[str], Any] | None = None,
    record_env: bool = True,
) -> list[str]:
    """Make a new worktree ready: submodules checked out, then the setup command run, then
    (``record_env``; a chat's directory has no use for it) the environment it holds noted
    as trusted (``tilth.environment.worktree_env``).

    Returns warnings for the user (a submodule that could not be checked out); raises
    ``SetupFailed`` when the setup command fails, after taking the worktree back (its
    branch stays), so the next command makes it afresh and runs the setup again —
    unless ``keep``: then the worktree stays as it is. ``on_progress`` hears that the
    setup command starts (a ``pip install`` may take minutes). ``confine`` (None only for
    the seed's own worktree, which holds no worker's file yet) confines the command.
    """
    if settings.setup_command and on_progress is not None:
        on_progress(f"running TILTH_SETUP_COMMAND in {worktree}: {settings.setup_command}")
    notes: list[str] = []
    problem = git_worktrees.init_submodules(worktree)
    if (worktree / ".gitmodules").is_file():
        session.log("submodules", ok=problem is None, detail=problem)
    if problem:
        notes.append(problem)
    try:
        run_setup(session, worktree, settings, why=why, confine=confine)
        if record_env:  # what the set-up made is trusted; what appears later may be the worker's
            record_worktree_env(session, worktree)
    except SetupFailed:
        source = session.source
        if not keep and source is not None and (source / ".git").exists():
            try:
                git_worktrees.remove_worktree(source, worktree)
            except (TilthError, OSError):
                pass
        raise
    return notes


def set_up_fork(
    child: Session,
    worktree: Path,
    settings: Settings,
    *,
    confine: ConfineIn,
    chat: bool = False,
    on_progress: Callable[[str], Any] | None = None,
) -> list[str]:
    """Make a fork's new worktree (``chat``: a chat's new directory) ready; warnings for the user.

    The one place a fork runs ``TILTH_SETUP_COMMAND``, whoever forks: ``tilth fork``, the
    library and ``tilth serve`` all go through ``TimelineController.fork``, which calls this.
    ``on_progress`` hears that the command starts (it may take minutes). A failure raises
    ``SetupFailed`` naming the new session; the fork is kept as made, since its worktree
    holds the checkpoint's uncommitted files, which a re-created worktree would not.
    """
    with child.lock():
        try:
            return prepare_worktree(
                child,
                worktree,
                settings,
                why="fork",
                confine=confine,
                keep=True,
                on_progress=on_progress,
                record_env=not chat,
            )
        except SetupFailed as exc:
            then = f"`tilth chat --resume {child.id}`" if chat else f"`tilth resume {child.id}`"
            raise SetupFailed(
                f"forked into session {child.id}, but {exc.message}",
                output=exc.output,
                hint=f"the fork is kept as made; the full output is in its `setup` event. "
                f"Fix the command, run it in {worktree} yourself, then {then}",
            ) from None


def run_setup(
    session: Session, worktree: Path, settings: Settings, *, why: str, confine: ConfineIn | None
) -> str | None:
    """Run the setup command in ``worktree`` (``why``: prep, fork, run); its output, or None.
    Outside the seed's own set-up (``prep``) the worktree holds the worker's files (a
    Makefile, a setup.py the command runs): then it runs confined by ``confine``.

    Logs ``setup {command, why, exit_code, seconds, ok, output}``; raises ``SetupFailed``
    (with the output) when it exits non-zero or times out.
    """
    command = settings.setup_command
    if not command:
        return None
    env = scrubbed_env(os.environ, secret_values(settings.env))
    env.pop("VIRTUAL_ENV", None)  # Tilth's own venv must not leak into the project's set-up
    started = time.monotonic()
    args = ["/bin/sh", "-c", command]
    launch: proc.Launch | None = None
    if why != "prep" and confine is not None:
        sandbox = confine(worktree)
        if sandbox is not None:
            args, launch = sandbox.wrap(args), sandbox.launcher()
    result = proc.run_capped(
        args, cwd=worktree, timeout=settings.setup_timeout_seconds, env=env, launch=launch
    )
    if why != "prep":
        remove_named_pipes(worktree)  # the worker's files ran: git must not block on a FIFO
    output = _tail(result.stdout + ("\n" + result.stderr if result.stderr.strip() else ""))
    ok = result.returncode == 0 and not result.timed_out
    session.log(
        "setup",
        command=command,
        why=why,
        worktree=str(worktree),
        exit_code=result.returncode,
        timed_out=result.timed_out,
        seconds=round(time.monotonic() - started, 2),
        ok=ok,
        output=output,
    )
    if ok:
        return output
    last = next((ln for ln in reversed(output.splitlines()) if ln.strip()), "no output")
    what = (
        f"timed out after {settings.setup_timeout_seconds:g}s"
        if result.timed_out
        else f"exit {result.returncode}"
    )
    raise SetupFailed(
        f"TILTH_SETUP_COMMAND failed in the worktree ({what}): {last.strip()}",
        output=output,
        hint=f"the full output is in the `setup` event of session {session.id}; "
        "fix the command (or TILTH_SETUP_TIMEOUT_SECONDS) and try again",
    )
