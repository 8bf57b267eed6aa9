"""``tilth attempts``, ``tilth enqueue`` and ``tilth worker``: best of N and the queue."""

from __future__ import annotations

import re
from typing import Any

import click

from tilth import Session
from tilth.cli.common import io, pick_session, refuse_chat, settings, yes_option
from tilth.errors import UsageError

_TASK = re.compile(r"^T-\d{3,}$")


@click.command()
@click.argument("args", nargs=-1, metavar="[SESSION_ID] [T-NNN]")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--pick", "picked", default=None, metavar="SESSION", help="Make this attempt the winner."
)
@click.option("--dry-run", is_flag=True, help="With --pick: print the plan, change nothing.")
@yes_option
def attempts(
    args: tuple[str, ...], as_json: bool, picked: str | None, dry_run: bool, assume_yes: bool
) -> None:
    """List a session's attempts (the latest session without SESSION_ID): per task, each
    attempt's session, whether it passed, was accepted, its failed gates, diff lines,
    tokens, and why it won or lost; an attempt not decided yet (a stop cut the run short)
    shows what it has done so far, marked undecided.

    --pick SESSION puts another attempt in its task's winner's place: the session is
    rewound to the task's start (undo: `tilth rewind --undo`) and that attempt's work is
    brought in; later tasks run again on `tilth resume`.
    """
    from tilth.library import list_attempts

    session_id, task_id = _split(args)
    cfg = settings()
    out = io()
    session = pick_session(cfg, session_id, out, "attempts", kind="run")
    refuse_chat(session, "attempts")
    if picked:
        _pick(session, picked, dry_run=dry_run, assume_yes=assume_yes)
        return
    rows = list_attempts(session, task_id)
    if as_json:
        out.print_json(rows)
        return
    if not rows:
        out.say(f"session {session.id} made no attempts" + (f" at {task_id}" if task_id else ""))
        out.dim("`tilth run <workspace> --attempts N` tries each task N times")
        return
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("task", "#", "session", "state", "passed", "accepted", "gates✗", "diff", "tokens"):
        table.add_column(name, no_wrap=True)
    table.add_column("why")
    for row in rows:
        table.add_row(*_cells(row))
    out.table(table)


def _cells(row: dict[str, Any]) -> list[str]:
    """One attempt's row: a decided one's figures, or an undecided one's progress marked
    as such (its tokens "so far", the figures columns empty: nothing is decided)."""
    head = [row["task_id"], str(row["number"]), row["session"]]
    so_far = row.get("so_far")
    if not row.get("decided", True) and isinstance(so_far, dict):
        tokens = f"{int(so_far.get('tokens') or 0):,} so far"
        return [*head, "undecided", "-", "-", "-", "-", tokens, str(so_far.get("summary"))]
    yes = {True: "yes", False: "no", None: "-"}
    return [
        *head,
        row["state"],
        yes[row.get("passed")],
        yes[row.get("accepted")],
        str(row.get("failed_gates", "-")),
        str(row.get("diff_lines", "-")),
        _count(row.get("tokens")),
        str(row.get("reason") or ""),
    ]


def _split(args: tuple[str, ...]) -> tuple[str | None, str | None]:
    session_id = task_id = None
    for arg in args:
        if _TASK.match(arg) and task_id is None:
            task_id = arg
        elif session_id is None and not _TASK.match(arg):
            session_id = arg
        else:
            raise UsageError(
                f"unexpected argument {arg!r}", hint="tilth attempts [SESSION_ID] [T-NNN]"
            )
    return session_id, task_id


def _pick(session: Session, picked: str, *, dry_run: bool, assume_yes: bool) -> None:
    from tilth.library import execute_pick, open_timeline, plan_pick

    out = io()
    timeline = open_timeline(session)
    if dry_run:
        out.say(plan_pick(timeline, picked).render())
        out.dim("dry run: nothing was changed")
        return
    with timeline.writing(out.warn):
        plan = plan_pick(timeline, picked)
        out.say(plan.render())
        out.confirm(f"Pick {picked} for {plan.task_id}?", assume_yes=assume_yes)
        execute_pick(timeline, plan)
    out.ok(f"{picked} is now the winner of {plan.task_id}")
    out.say(f"undo with: tilth rewind {session.id} --undo")


@click.command()
@click.argument("session_ids", nargs=-1, required=True, metavar="SESSION_ID...")
def enqueue(session_ids: tuple[str, ...]) -> None:
    """Put sessions on the durable queue; `tilth worker` processes run them.

    With TILTH_DATABASE_URL=postgresql://... the queue is shared by every machine
    whose workers use that database (and share TILTH_HOME and the repository).
    """
    from tilth.library import enqueue_sessions, open_session

    cfg = settings()
    out = io()
    sessions = [open_session(sid, cfg) for sid in session_ids]
    for session in sessions:
        refuse_chat(session, "enqueue")
    for session, workflow in zip(sessions, enqueue_sessions(sessions, cfg), strict=True):
        out.ok(f"queued {session.id} ({workflow})")


@click.command()
@click.option(
    "--parallel",
    type=click.IntRange(min=1),
    default=None,
    help="How many sessions or attempts this worker runs at once [TILTH_PARALLEL; 1].",
)
def worker(parallel: int | None) -> None:
    """Take queued sessions and attempts from the durable queue until stopped (Ctrl-C).

    A worker killed mid-attempt loses nothing: another worker sees its session
    unheld and continues it through `tilth resume`'s own machinery.
    """
    import threading

    from tilth.library import run_worker
    from tilth.ui.visualize.page import write_chat_html

    cfg = settings()
    out = io()
    stop = threading.Event()
    count = parallel or cfg.parallel or 1
    out.say(f"worker: taking work from the queue, {count} at a time (Ctrl-C stops)")
    try:
        run_worker(cfg, count, stop, on_line=out.say, write_page=write_chat_html)
    except KeyboardInterrupt:
        stop.set()
        out.say("worker stopped")


def _count(value: object) -> str:
    """A figure as the other token counts are shown (``18,982``); ``-`` when absent."""
    return f"{value:,}" if isinstance(value, int) else "-"
