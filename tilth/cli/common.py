"""Helpers shared by the verb modules: settings, IO and session resolution."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from tilth.config import Settings, load_settings
from tilth.errors import UsageError
from tilth.ui.io import IO

if TYPE_CHECKING:
    from tilth import Session


def settings(model_writable: tuple[Path, ...] = ()) -> Settings:
    """Settings from the environment (raises ``ConfigError`` on a malformed value).

    Problems that do not stop the command (an unparsable ``.env`` line, a ``./.env`` a
    model could have written) are shown once. ``model_writable``: see ``load_settings``.
    """
    cfg = load_settings(model_writable=model_writable)
    if cfg.warnings:
        warn = IO()
        for line in cfg.warnings:
            warn.warn(line)
    return cfg


def io() -> IO:
    """The IO object for this command."""
    return IO()


def pick_session(
    cfg: Settings, session_id: str | None, out: IO, verb: str, *, kind: str | None = None
) -> Session:
    """The named session, or the latest one — announced on stderr, so stdout stays clean.

    ``kind="run"`` for verbs that only runs have (tasks, a seed): "latest" skips chats.
    """
    from tilth.library import open_session

    session = open_session(session_id, cfg, kind=kind)
    if session_id is None:
        out.note(f"{verb}: latest session is {session.id}")
    return session


def refuse_chat(session: Session, verb: str) -> None:
    """A ``UsageError`` for a verb that works on runs only (tasks, a seed, a branch)."""
    from tilth.chat import is_chat

    if is_chat(session):
        raise UsageError(
            f"session {session.id} is a chat session: `tilth {verb}` works on runs "
            "(tasks, a seed, a branch), which a chat does not have",
            hint=f"go back in a chat with `tilth rewind {session.id} --to cp-NNNN` "
            f"or /rewind in `tilth chat --resume {session.id}`",
        )


session_id_argument = click.argument("session_id", required=False, metavar="[SESSION_ID]")
yes_option = click.option("-y", "--yes", "assume_yes", is_flag=True, help="Do not ask to confirm.")


def workspace_argument(func: click.decorators.FC) -> click.decorators.FC:
    """The ``WORKSPACE`` positional (a path to the source repository)."""
    return click.argument(
        "workspace", type=click.Path(path_type=Path, file_okay=False), metavar="WORKSPACE"
    )(func)
