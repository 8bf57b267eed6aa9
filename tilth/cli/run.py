"""``tilth run`` and ``tilth resume``: pick the session, drive it, exit with what happened."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from tilth import Session, Stop
from tilth.cli.common import io, pick_session, session_id_argument, settings, workspace_argument
from tilth.config import Settings
from tilth.errors import TilthError, UsageError
from tilth.library import ensure_repository, sessions_of
from tilth.ui.io import IO

EXIT_USAGE = 2


def _attempt_options(func: Any) -> Any:
    func = click.option(
        "--parallel",
        type=click.IntRange(min=1),
        default=None,
        help="How many attempts run at once on this machine [TILTH_PARALLEL; all of them].",
    )(func)
    return click.option(
        "--attempts",
        type=click.IntRange(min=1),
        default=None,
        help="Try each task N times from its start; the best by the checks is kept "
        "[TILTH_ATTEMPTS; 1].",
    )(func)


def _with_attempts(cfg: Settings, attempts: int | None, parallel: int | None) -> Settings:
    from dataclasses import replace

    return replace(
        cfg,
        attempts=attempts if attempts is not None else cfg.attempts,
        parallel=parallel if parallel is not None else cfg.parallel,
    )


@click.command()
@workspace_argument
@_attempt_options
def run(workspace: Path, attempts: int | None, parallel: int | None) -> int:
    """Run the prepared session for WORKSPACE through its tasks.

    The session is the one `tilth prep-feature WORKSPACE` made. Task by task,
    the worker model plans, implements and submits its case once the task's
    seed tests pass; the evaluator model reviews the diff; the seed tests run
    again. Every completed stage is a commit on the branch session/<id> in the
    session's own worktree: your working tree is never touched. A stopped run
    continues with `tilth resume`.

    \b
    With --attempts N each task is tried N times from its start, K at a time
    (--parallel), each attempt a session of its own; the best by the checks
    (tests, review, failed gates, diff size, tokens) lands on the branch and
    `tilth attempts` shows them all.

    \b
    Example:
      tilth run ~/code/myrepo
      tilth run ~/code/myrepo --attempts 3 --parallel 2
      git -C ~/code/myrepo log session/<id>    the work, to review and merge

    \b
    Exit codes: 0 all tasks done; 3 halted on a failed task or a cap;
    130 interrupted (Ctrl-C); 1 error; 2 nothing ran: nothing to run, the
    session is in use, or the project's test environment cannot start.
    """
    cfg = _with_attempts(settings(), attempts, parallel)
    out = io()
    source = ensure_repository(workspace)
    prepared = sessions_of(source, statuses=("prepared",), settings=cfg)
    if len(prepared) > 1:
        out.error(f"{len(prepared)} prepared sessions for {source}; `tilth run` needs exactly one")
        from tilth.ui.pickers import print_rows

        print_rows(out, prepared)
        out.say(
            "→ run one with `tilth resume <id>`, or discard the ones you don't want with "
            "`tilth reset <id>` until one remains",
            style="yellow",
        )
        return EXIT_USAGE
    if not prepared:
        return _nothing_prepared(cfg, out, source)
    session = prepared[0]
    out.dim(f"picking up prepared session {session.id}")
    return _drive(session, cfg, out, resume=False)


@click.command()
@session_id_argument
@click.option(
    "--dry-run", is_flag=True, help="Print what resuming would prepare and change nothing."
)
@_attempt_options
def resume(
    session_id: str | None, dry_run: bool, attempts: int | None, parallel: int | None
) -> int:
    """Continue a stopped session where it left off (the latest one without SESSION_ID).

    Failed tasks go back to pending and the FAILED placeholder commit is
    unwound so the retry builds on the partial work. A task interrupted
    mid-way continues from its last completed turn. A prepared session that
    never ran is simply run, as `tilth run` would. Exit codes as for `tilth run`.
    """
    cfg = _with_attempts(settings(), attempts, parallel)
    out = io()
    session = pick_session(cfg, session_id, out, "resume", kind="run")
    if dry_run:
        from tilth.library import plan_resume

        out.say(plan_resume(session, on_notice=out.warn).render())
        out.dim("dry run: nothing was changed")
        return 0
    return resume_session(session, cfg, out)


def resume_session(session: Session, cfg: Settings, out: IO) -> int:
    """Resume ``session`` (shared by ``tilth resume`` and the ``run`` picker)."""
    if session.record().kind == "chat":
        raise UsageError(
            f"session {session.id} is a chat session",
            hint=f"continue it with `tilth chat --resume {session.id}`",
        )
    if session.status == "prepared":
        out.dim(f"session {session.id} is prepared and never ran; running it (as `tilth run`)")
        return _drive(session, cfg, out, resume=False)
    tasks = session.tasks()
    # A crash between the last task and its stop event leaves "running": the loop fixes that.
    if session.status == "all_done" and all(t.status == "done" for t in tasks):
        from tilth import library

        library.resume(session, settings=cfg, out=out)  # changes nothing; logs session_resume
        out.ok(f"session {session.id} is all done; nothing to resume")
        return 0
    return _drive(session, cfg, out, resume=True)


def _drive(session: Session, cfg: Settings, out: IO, *, resume: bool) -> int:
    from tilth import library
    from tilth.ui.progress import TerminalProgress

    run_or_resume = library.resume if resume else library.run
    stop = run_or_resume(
        session,
        settings=cfg,
        out=out,
        progress_for=lambda label: TerminalProgress(out, label=label),
    )
    return _report(stop, out)


def _report(stop: Stop, out: IO) -> int:
    if stop.reason == "error":
        hint = None
        if stop.error is not None and not isinstance(stop.error, TilthError):
            if os.environ.get("TILTH_DEBUG"):
                raise stop.error
            hint = "set TILTH_DEBUG=1 to see the traceback"
        elif isinstance(stop.error, TilthError):
            hint = stop.error.hint
        out.error(stop.detail or "the run stopped on an error", hint=hint)
    elif stop.reason == "interrupted":
        out.warn("interrupted; state saved — `tilth resume` continues from here")
    return stop.exit_code


# ---- nothing prepared ---------------------------------------------------------------------------
def _nothing_prepared(cfg: Settings, out: IO, source: Path) -> int:
    """No prepared session: a picker on a terminal, else the next command (exit 2)."""
    from tilth.ui import pickers

    # A live run is not "resumable": when any session of this workspace is held by a running
    # process (a second `tilth run` started while the first works), say who holds it.
    for candidate in sessions_of(source, statuses=("running", "failed"), settings=cfg):
        with candidate.lock():
            pass
    prior = prior_session(cfg, source)
    if not out.interactive:
        if prior is None or not pickers.is_seeded(prior):
            out.error(f"no prepared session for {source}")
            out.say(f"→ tilth prep-feature {source}   (seed one first)", style="yellow")
        else:
            stop = prior.last_stop() or "no stop event"
            out.error(f"no prepared session for {source}; session {prior.id} is resumable ({stop})")
            out.say(f"→ tilth resume {prior.id}   (continue it)", style="yellow")
            out.say(
                f"→ tilth reset {prior.id} -y && tilth prep-feature {source}   "
                "(discard it and start fresh)",
                style="yellow",
            )
        return EXIT_USAGE
    action = pickers.choose_without_prepared(out, prior)
    if action == pickers.RESUME and prior is not None:
        return resume_session(prior, cfg, out)
    if action == pickers.DISCARD and prior is not None:
        from tilth.cli.prep import confirm_discard
        from tilth.library import delete_session

        confirm_discard(out, [prior])
        with prior.lock():
            delete_session(prior)
        out.dim(f"discarded {prior.id}")
        return _prep_then_run(source)
    if action == pickers.PREP_NOW:
        return _prep_then_run(source)
    out.say("cancelled")
    return 0


def _prep_then_run(source: Path) -> int:
    from tilth.cli import main

    rc = main(["prep-feature", str(source)])
    return rc if rc != 0 else main(["run", str(source)])


def prior_session(cfg: Settings, source: Path) -> Session | None:
    """The newest session of ``source`` that ran (or began prep) and stopped short."""
    found = sessions_of(source, statuses=("running", "failed"), settings=cfg)
    return found[-1] if found else None
