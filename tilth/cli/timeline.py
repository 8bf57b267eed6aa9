"""``tilth checkpoints``, ``tilth rewind`` and ``tilth restart``: thin fronts on the timeline."""

from __future__ import annotations

from contextlib import ExitStack

import click

from tilth import Checkpoint, TimelineController
from tilth.cli.common import (
    io,
    pick_session,
    refuse_chat,
    session_id_argument,
    settings,
    yes_option,
)
from tilth.errors import SessionLocked, StorageError, UsageError
from tilth.ui.io import IO


def _recover_if_free(timeline: TimelineController, out: IO) -> None:
    """Finish an interrupted operation unless a live run holds the lock (then only read)."""
    try:
        message = timeline.recover()
    except StorageError as exc:  # a read-only session directory can still be read
        out.note(f"{exc.message}; showing the session as it is on disk")
        return
    if message:
        out.warn(message)


@click.command()
@session_id_argument
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--gc",
    "run_gc",
    is_flag=True,
    help="Apply the snapshot retention budgets now (every session) and report what was freed.",
)
def checkpoints(session_id: str | None, as_json: bool, run_gc: bool) -> None:
    """List a session's checkpoints: id, time, kind, task/stage/turn, label, files changed.

    A checkpoint is a point you can return to: the seed, each task's start,
    each completed stage, each model turn, each stop, and the undo points that
    go-backs record. `tilth rewind --to`, `tilth fork --at` and `tilth summarize
    --at` take its id (cp-0007), its number (7), seed, latest, T-001 (the task's
    start) or T-001/planning (that stage done). Listing changes nothing; --gc
    prunes old turn snapshots of every session.
    """
    out = io()
    if run_gc:
        # Turn-snapshot retention: age and size budgets, then a sweep.
        from tilth.library import collect_snapshots

        if session_id:
            out.warn(f"--gc applies the budgets to every session, not only {session_id}")
        report = collect_snapshots(settings())
        if as_json:
            out.print_json(
                {
                    "checkpoints_pruned": report.checkpoints_pruned,
                    "blobs_removed": report.blobs_removed,
                    "bytes_freed": report.bytes_freed,
                    "bytes_kept": report.bytes_kept,
                }
            )
        else:
            out.ok(report.render())
        return
    cfg = settings()
    session = pick_session(cfg, session_id, out, "checkpoints")
    controller = TimelineController(session, cfg)
    _recover_if_free(controller, out)
    timeline = controller.checkpoints()
    for problem in timeline.problems:
        out.warn(problem)
    if as_json:
        out.print_json([cp.summary() for cp in timeline.checkpoints])
        return
    if not timeline.checkpoints:
        out.say(f"session {session.id} has no checkpoints yet")
        return
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    # Ids stay whole (people copy them into `rewind --to`); only the label wraps, at spaces.
    narrow = out.console.is_terminal and out.console.width < WIDE_COLUMNS
    table.add_column("id", no_wrap=True, min_width=7)
    table.add_column("time", no_wrap=True)
    if not narrow:
        table.add_column("kind", no_wrap=True)
    table.add_column("where", no_wrap=True)
    table.add_column("label", ratio=1)
    table.add_column("files", no_wrap=not narrow)
    for cp in timeline.checkpoints:
        if narrow:
            # An 80-column terminal: the date, the kind (the place says it) and file names go;
            # `--json` or a wider window shows them.
            files = f"{len(cp.files_changed)}" if cp.files_changed else "-"
            files += " +gaps" if cp.gaps else ""
            table.add_row(cp.id, cp.ts[11:16], cp.where, cp.label, files)
        else:
            stamp = cp.ts.replace("T", " ")[:19]
            table.add_row(cp.id, stamp, cp.kind, cp.where, cp.label, _files_text(cp))
    out.table(table)


WIDE_COLUMNS = 140
"""Below this terminal width ``checkpoints`` shows its compact table."""


def _files_text(cp: Checkpoint) -> str:
    text = "-"
    if cp.files_changed:
        shown = ", ".join(cp.files_changed[:3])
        more = len(cp.files_changed) - 3
        text = f"{len(cp.files_changed)}: {shown}" + (f" +{more}" if more > 0 else "")
    if cp.gaps:
        text += f" (gaps: {'; '.join(cp.gaps)})"
    return text


def _pick(timeline: TimelineController, out: IO) -> Checkpoint:
    """The numbered checkpoint picker (newest first), or the exit-2 pointer without a TTY."""
    session = timeline.session
    if not out.interactive:
        raise UsageError(
            "which checkpoint? --to is required when stdin is not a terminal",
            hint=f"`tilth checkpoints {session.id}` lists them; e.g. "
            f"`tilth rewind {session.id} --to latest --dry-run`",
        )
    found = timeline.checkpoints().checkpoints
    if not found:
        raise UsageError(f"session {session.id} has no checkpoints to rewind to")
    # The number typed is the checkpoint's own number (as in `tilth checkpoints` and --to).
    by_number = {str(cp.seq): cp for cp in found}
    num_w = max(len(n) for n in by_number)
    kind_w = max(len(cp.kind) for cp in found)
    where_w = max(len(cp.where) for cp in found)
    out.say("Rewind to which checkpoint? (newest first)")
    for cp in reversed(found):
        out.say(
            f"  {cp.seq:>{num_w}}) {cp.id}  {cp.ts[11:19]}  {cp.kind:{kind_w}}  "
            f"{cp.where:{where_w}}  {cp.label}"
        )
    out.say(f"  {'0':>{num_w}})  cancel")
    while True:
        answer = (out.readline("checkpoint number> ") or "0").strip()
        if answer == "0":
            from tilth.errors import Aborted

            raise Aborted("cancelled; nothing was changed")
        chosen = by_number.get(answer.removeprefix("cp-").lstrip("0") or "0")
        if chosen is not None:
            return chosen
        out.say(f"type one of the numbers shown (e.g. {found[-1].seq}), or 0 to cancel", "yellow")


@click.command()
@session_id_argument
@click.option(
    "--to",
    "to_ref",
    default=None,
    metavar="CHECKPOINT",
    help="cp-0007, 7, seed, latest, T-001 (task start) or T-001/planning (stage).",
)
@click.option(
    "--scope",
    type=click.Choice(TimelineController.SCOPES),
    default="both",
    show_default=True,
    help="both: code and conversation; code: files only; conversation: threads+state.",
)
@click.option("--dry-run", is_flag=True, help="Print what would change and change nothing.")
@click.option(
    "--force", is_flag=True, help="Also overwrite files you edited since the last checkpoint."
)
@click.option(
    "--undo",
    is_flag=True,
    help="Undo the last go-back (rewind, restart, resume, undo): back to its before- point; "
    "with --to, that undo point. Undoing an undo is redo.",
)
@yes_option
def rewind(
    session_id: str | None,
    to_ref: str | None,
    scope: str,
    dry_run: bool,
    force: bool,
    undo: bool,
    assume_yes: bool,
) -> None:
    """Return code and/or conversation to a checkpoint, or undo the last go-back.

    Makes the session's files (--scope code), its conversation and task state
    (--scope conversation), or both, equal to checkpoint --to: later commits,
    events, threads and checkpoints are dropped. Files you edited by hand since
    the last checkpoint are kept unless --force. The plan is shown and [y/N]
    asked first (-y skips it; without a terminal -y is required). Without --to,
    a terminal gets a picker; `tilth checkpoints` lists them. Every rewind
    records an undo point first: `tilth rewind --undo` puts everything back.

    \b
    Examples:
      tilth rewind --to T-002/planning --dry-run   show the plan only
      tilth rewind --to cp-0012 --scope code -y    files only, no question
      tilth rewind --undo                          undo the last go-back
    """
    out = io()
    cfg = settings()
    session = pick_session(cfg, session_id, out, "rewind")
    timeline = TimelineController(session, cfg)
    if undo:
        _undo(timeline, out, to_ref, dry_run=dry_run, assume_yes=assume_yes)
        return
    with timeline.writing(out.warn):
        target = timeline.resolve(to_ref) if to_ref else _pick(timeline, out)
        # A person reads the plan before it runs: list every edit made since (one walk).
        # With -y nothing waits on the list, so only the files the rewind writes are read.
        plan = timeline.plan_rewind(target, scope, force=force, survey=dry_run or not assume_yes)
        out.say(plan.render())
        if dry_run:
            out.dim("dry run: nothing was changed")
            return
        out.confirm(f"Rewind session {session.id} to {target.id}?", assume_yes=assume_yes)
        timeline.execute(plan)
    out.ok(f"rewound session {session.id} to {target.id} ({scope})")
    from tilth.chat import is_chat

    if is_chat(session):  # `tilth resume` refuses a chat
        out.say(f"continue the chat with: tilth chat --resume {session.id}")
    elif scope != "code":
        out.say(f"continue from there with: tilth resume {session.id}")


def _undo(
    timeline: TimelineController, out: IO, ref: str | None, *, dry_run: bool, assume_yes: bool
) -> None:
    session = timeline.session
    with timeline.writing(out.warn):
        plan = timeline.plan_undo(ref, survey=dry_run or not assume_yes)
        out.say(plan.render())
        if dry_run:
            out.dim("dry run: nothing was changed")
            return
        out.confirm(f"Undo: return session {session.id} to {plan.target}?", assume_yes=assume_yes)
        result = timeline.execute(plan)
    out.ok(f"session {session.id} is back at {plan.target} ({plan.target_label})")
    if result.undo_point:
        out.say(f"redo with: tilth rewind {session.id} --undo")


@click.command()
@click.argument("args", nargs=-1, metavar="[SESSION_ID] T-NNN")
@click.option(
    "--from",
    "from_stage",
    default=None,
    metavar="STAGE",
    help="Restart from this completed stage (default: the whole task).",
)
@click.option(
    "--stop/--no-stop",
    "stop_run",
    default=True,
    help="Abort a live run of the session first (Ctrl-C to its pid, then wait) — the default; "
    "--no-stop refuses instead.",
)
@click.option("--dry-run", is_flag=True, help="Print what would change and change nothing.")
@yes_option
def restart(
    args: tuple[str, ...], from_stage: str | None, stop_run: bool, dry_run: bool, assume_yes: bool
) -> None:
    """Restart a task, or a task from one of its completed stages. Never runs it.

    A live run of the session is aborted first (as if Ctrl-C was pressed; it
    stays resumable). The worktree is rolled back to the commit of the stage
    before the target, outputs of the target stage and everything after it are
    cleared, and the task becomes pending: `tilth resume` continues from there.
    Uncommitted changes are saved on refs/tilth/stash/<id> first. The plan is
    shown and [y/N] asked (-y skips it); `tilth rewind --undo` takes it back.

    \b
    Examples:
      tilth restart T-002                       the whole task
      tilth restart T-002 --from code_review    its review and what follows
    """
    if len(args) == 1:
        session_id, task_id = None, args[0]
    elif len(args) == 2:
        session_id, task_id = args
    else:
        raise UsageError(
            "expected [SESSION_ID] T-NNN", hint="e.g. `tilth restart T-002 --from implementing`"
        )
    cfg = settings()
    out = io()
    session = pick_session(cfg, session_id, out, "restart", kind="run")
    refuse_chat(session, "restart")
    timeline = TimelineController(session, cfg)
    if dry_run:
        _recover_if_free(timeline, out)
        out.say(timeline.plan_restart(task_id, from_stage).render())
        out.dim("dry run: nothing was changed")
        return
    if stop_run:
        stopped = timeline.stop_run()
        if stopped is not None:
            out.warn(f"stopped the live run of session {session.id} (pid {stopped})")
    with ExitStack() as stack:
        try:
            stack.enter_context(timeline.writing(out.warn))
        except SessionLocked as exc:
            raise SessionLocked(
                exc.message, hint="stop that run first (Ctrl-C), or re-run without --no-stop"
            ) from None
        plan = timeline.plan_restart(task_id, from_stage)
        out.say(plan.render())
        out.confirm(f"Restart {task_id}?", assume_yes=assume_yes)
        timeline.execute(plan)
    out.ok(f"{task_id} restarted; it is pending")
    out.say(f"run it with: tilth resume {session.id}")
