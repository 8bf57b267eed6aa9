"""``tilth serve``: the local web UI and JSON API (a thin front on tilth.web)."""

from __future__ import annotations

import sys

import click

from tilth.cli.common import settings


@click.command()
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port on 127.0.0.1; 0 picks a free one.",
)
@click.option(
    "--no-open",
    is_flag=True,
    help="Do not open a browser (it is opened only when run from a terminal).",
)
def serve(port: int, no_open: bool) -> int:
    """Serve the local web UI and JSON API on 127.0.0.1.

    The first line printed is the URL to open; it carries a fresh token, and
    every API request needs that token. Ctrl-C stops the server (runs it
    started are interrupted and stay resumable).
    """
    from tilth.web import serve

    cfg = settings()
    open_browser = not no_open and sys.stdout.isatty()
    return serve(cfg, port, open_browser=open_browser)
