"""``tilth sessions``: list sessions."""

from __future__ import annotations

from pathlib import Path

import click

from tilth import SessionInfo, list_sessions
from tilth.cli.common import io, settings
from tilth.ui.io import IO


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--workspace", type=click.Path(), default=None, help="Only sessions of this repo.")
def sessions(as_json: bool, workspace: str | None) -> None:
    """List sessions: id, kind (run or chat), status, tasks done/total, last stop, source.

    The status says what is happening now: running (a live process holds the
    session), stopped (it can be resumed), interrupted (its process was killed),
    prepared, all_done or failed; a fork names its parent. --json also gives the
    recorded status beside the shown state. The newest session is listed last.
    """
    from pathlib import Path

    cfg = settings()
    out = io()
    rows = list_sessions(cfg)
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
    # Ids must stay whole (people copy them into the next command); status wraps at spaces;
    # a source path too long for the terminal loses its start, never a word in its middle.
    table.add_column("id", no_wrap=True, min_width=22)
    table.add_column("kind", no_wrap=True)
    table.add_column("status")
    table.add_column("tasks", no_wrap=True)
    table.add_column("last stop", no_wrap=True)
    table.add_column("source", no_wrap=True)
    room = _source_room(out, rows)
    for r in rows:
        state = r.state or r.status
        status = state if not r.parent else f"{state} (fork of {r.parent})"
        if r.problem:
            status = f"damaged: {r.problem}"
        tasks = f"{r.tasks_done}/{r.tasks_total}" if r.tasks_total else "-"
        source = _shorten(r.source or "?", room)
        table.add_row(r.id, r.kind, status, tasks, r.last_stop or "-", source)
    out.table(table)


def _source_room(out: IO, rows: list[SessionInfo]) -> int | None:
    """Columns left for the source path on a terminal (None: no limit, e.g. piped)."""
    if not out.console.is_terminal:
        return None
    widest_status = max(len(r.state or r.status) for r in rows)
    used = 22 + 4 + min(widest_status, 24) + 5 + 13 + 5 * 2  # id, kind, status, tasks...
    return max(out.console.width - used, 16)


def _shorten(path: str, room: int | None) -> str:
    home = str(Path.home())
    if path.startswith(home + "/"):
        path = "~" + path[len(home) :]
    if room is None or len(path) <= room:
        return path
    return "…" + path[-(room - 1) :]
