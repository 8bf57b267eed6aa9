"""``tilth visualize``: write a session's self-contained ``chat.html``."""

from __future__ import annotations

import click

from tilth.cli.common import io, pick_session, session_id_argument, settings
from tilth.errors import TilthError


@click.command()
@session_id_argument
def visualize(session_id: str | None) -> None:
    """Write sessions/<id>/chat.html: the whole session as one offline page.

    Without SESSION_ID the latest session is used. Safe to run while the
    session is still running; run it again to refresh the page.
    """
    from tilth.ui.visualize.page import write_chat_html

    cfg = settings()
    out = io()
    session = pick_session(cfg, session_id, out, "visualize")
    try:
        path = write_chat_html(session)
    except OSError as exc:
        raise TilthError(
            f"could not write {session.chat_html_path}: {exc.strerror or exc}"
        ) from None
    out.say(f"wrote {path}")
