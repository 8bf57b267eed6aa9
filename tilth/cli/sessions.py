"""``tilth sessions``: list sessions."""

from __future__ import annotations

import click

from tilth.cli.common import io, settings
from tilth.session.discovery import list_sessions


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--workspace", type=click.Path(), default=None, help="Only sessions of this repo.")
def sessions(as_json: bool, workspace: str | None) -> None:
    """List sessions: id, kind (run or chat), status, tasks done/total, last stop, source."""
    from pathlib import Path

    cfg = settings()
    out = io()
    rows = list_sessions(cfg.sessions_dir)
    scope = ""
    if workspace:
        wanted = str(Path(workspace).expanduser().resolve())
        rows = [r for r in rows if r.source == wanted]
        scope = f" of {wanted}"
    if as_json:
        out.print_json([r.as_dict() for r in rows])
        return
    if not rows:
        # With --workspace, other repos' sessions may exist: do not claim there are none at all.
        out.say(f"no sessions{scope} under {cfg.sessions_dir}")
        return
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    # Ids must stay whole (people copy them into the next command); long text folds.
    table.add_column("id", no_wrap=True, min_width=22)
    table.add_column("kind", no_wrap=True)
    table.add_column("status", overflow="fold")
    table.add_column("tasks", no_wrap=True)
    table.add_column("last stop", no_wrap=True)
    table.add_column("source", overflow="fold")
    for r in rows:
        status = r.status if not r.parent else f"{r.status} (fork of {r.parent})"
        if r.problem:
            status = f"unreadable: {r.problem}"
        tasks = f"{r.tasks_done}/{r.tasks_total}" if r.tasks_total else "-"
        table.add_row(r.id, r.kind, status, tasks, r.last_stop or "-", r.source or "?")
    out.table(table)
