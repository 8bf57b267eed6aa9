"""Driving one session for ``run``/``resume``: lock, worktree, models, the loop, the summary.

The lock is held for the whole invocation so two processes never drive one
session; ``timeline.recover`` runs right after taking it, so a rewind that a
crash interrupted is finished (or undone) before anything else reads the state.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

from tilth.agent.branch_guard import require_session_branch
from tilth.agent.loop import run_loop
from tilth.agent.prd_check import check_prd_before_run
from tilth.agent.progress_sinks import SilentProgress
from tilth.agent.records import task_counts
from tilth.agent.resume import prepare_resume
from tilth.agent.run_context import CheckpointRecorder, Notices, Progress, RunContext, prep_tokens
from tilth.agent.stops import CAP_SETTINGS, Stop
from tilth.config import Role, Settings
from tilth.environment.project import ProjectEnv, check_project_env, resolve_project_env
from tilth.environment.worktree_env import trusted_worktree_env
from tilth.environment.worktree_setup import prepare_worktree
from tilth.errors import (
    ContextOverflow,
    ContextTooSmall,
    SetupFailed,
    TilthError,
    WorkspaceError,
)
from tilth.git import worktrees as git_worktrees
from tilth.model.base import Model
from tilth.model.endpoint_facts import no_tools_warning
from tilth.session.store import Session
from tilth.stops import stop_signals_interrupt
from tilth.tools.sandbox import (
    confinement,
    sandbox_for,
    sandbox_limits,
    sandbox_status,
    unsandboxed_warning,
)


def models_for_run(settings: Settings, session: Session, out: Notices) -> tuple[Model, Model]:
    """Worker and evaluator models (the turn loop logs and shows each retry)."""
    from tilth.model import model_for  # imports httpx: only when running

    def refused(role: Role) -> Any:
        def on_stream_refused(reason: str) -> None:
            session.log("model_stream_refused", role=role, reason=reason)
            out.warn(f"the {role} endpoint refused streaming ({reason}); calling it without")

        return on_stream_refused

    worker = model_for(settings, "worker", on_stream_refused=refused("worker"))
    evaluator = model_for(settings, "evaluator", on_stream_refused=refused("evaluator"))
    return worker, evaluator


def is_scripted(model: Model) -> bool:
    """True for the scripted model (the demo and tests): it must be labelled everywhere."""
    return model.name.lower().startswith("scripted")


def ensure_session_worktree(
    session: Session, settings: Settings | None = None, out: Notices | None = None
) -> Path:
    """The session's worktree, re-created from its branch when it went missing.

    A re-created worktree is a new worktree (given ``settings``): its submodules are checked
    out and ``TILTH_SETUP_COMMAND`` runs in it.
    """
    source = session.source
    if source is None or not (source / ".git").exists():
        raise WorkspaceError(
            f"the source repository of session {session.id} ({source or 'unknown'}) is gone",
            hint=f"if you moved it: `tilth doctor {session.id} --repair --source NEWPATH`; "
            f"otherwise discard the session with `tilth reset {session.id}`",
        )
    if not git_worktrees.branch_exists(source, session.branch):
        raise WorkspaceError(
            f"branch {session.branch} no longer exists in {source}",
            hint=f"`tilth doctor {session.id} --repair` re-points it at the last recorded "
            f"commit (or `tilth fork {session.id} --at latest` starts over from there)",
        )
    had_worktree = session.workspace_dir.is_dir()
    worktree = git_worktrees.ensure_worktree(source, session.workspace_dir, session.branch)
    session.update_checkpoint(workspace=str(worktree), branch=session.branch)
    if not had_worktree and settings is not None:
        progress = out.dim if out is not None else None
        confine = confinement(settings, session)
        notes = prepare_worktree(
            session, worktree, settings, why="run", confine=confine, on_progress=progress
        )
        for note in notes:
            if out is not None:
                out.warn(note)
    return worktree


def choose_environment(session: Session, worktree: Path, settings: Settings) -> ProjectEnv:
    """Resolve and pre-flight the project's environment; log ``environment``.

    Only what the worktree held before the worker ran may choose it
    (``tilth.environment.worktree_env``).
    """
    trusted = trusted_worktree_env(session, worktree)
    environment = resolve_project_env(worktree, session.source, settings, trusted=trusted)
    check_project_env(environment, worktree)
    session.log("environment", **environment.to_dict())
    return environment


def ignored_warning(environment: ProjectEnv) -> str:
    """What the user reads when worktree entries were passed over."""
    names = ", ".join(str(path) for path in environment.ignored)
    return (
        f"not using {names}: it was not there when the session's environment was first chosen "
        "(the worker may have made it). Delete it, or set TILTH_TEST_COMMAND to run the tests "
        "another way"
    )


def _before_loop(
    session: Session, settings: Settings, out: Notices, *, resume: bool
) -> tuple[Path, ProjectEnv]:
    """Everything between taking the lock and the loop; no model call is made here."""
    from tilth.timeline import recover

    recover(session)
    had_worktree = session.workspace_dir.is_dir()
    worktree = ensure_session_worktree(session, settings, out)
    if not had_worktree:
        out.warn(f"the worktree was missing; re-created it at {worktree}")
    require_session_branch(worktree, session.branch, session.id)
    check_prd_before_run(session, worktree)  # before the resume plan rewrites statuses
    environment = choose_environment(session, worktree, settings)
    if environment.ignored:
        out.warn(ignored_warning(environment))
    if resume:
        plan = prepare_resume(session, worktree)  # journaled; logs session_resume
        out.say(f"resume plan: {plan.text}")
    else:
        session.log(
            "session_start",
            source=str(session.source),
            phase="run",
            worktree=str(worktree),
            branch=session.branch,
        )
    return worktree, environment


def drive(
    session: Session,
    settings: Settings,
    out: Notices,
    *,
    resume: bool,
    models: tuple[Model, Model] | None = None,
    progress: Progress | None = None,
    progress_for: ProgressFactory | None = None,
    write_page: PageWriter | None = None,
    started: float | None = None,
) -> Stop:
    """Run (or resume) ``session`` to a stop, holding its lock throughout.

    ``models`` (worker, evaluator) and ``progress`` are injected by library users
    (``tilth.run``); by default the models come from settings. Progress goes to
    ``progress``, else to what ``progress_for(label)`` makes (the CLI's terminal line,
    ``label`` saying "scripted model" when it is one), else nowhere. ``write_page`` writes
    the session's ``chat.html`` after the loop (the CLI hands in the visualizer, which lives
    above this module); without it the summary says how to write one.

    Nothing before the loop calls a model: a missing setting, a worktree that cannot be
    made, a failing ``TILTH_SETUP_COMMAND`` or a test environment that does not start
    ends the command there (logged as ``stop {error}``) without spending a token.
    ``started`` (a ``time.monotonic()`` instant) is when the invocation whose wall clock
    this run shares began: an attempt driven by a run counts from the run's start.
    """
    from tilth.timeline import TimelineController

    started = time.monotonic() if started is None else started
    # A fork a crash left half-made is completed first (from its parent's journal).
    TimelineController(session, settings).complete_fork(out.warn)
    with session.lock(), _sigterm_as_interrupt():
        # Models before anything else: a missing setting fails here, with nothing changed yet.
        worker, evaluator = models or models_for_run(settings, session, out)
        for warning in dict.fromkeys(filter(None, map(no_tools_warning, (worker, evaluator)))):
            out.warn(warning)
        sandboxed = check_sandbox(settings, out)
        from tilth.timeline import Recorder

        try:
            worktree, environment = _before_loop(session, settings, out, resume=resume)
        except TilthError as exc:
            _log_early_stop(session, exc, resume=resume)
            raise
        session.log("sandbox", mode=settings.sandbox, **sandboxed)
        session.set_status("running")
        scripted = is_scripted(worker) or is_scripted(evaluator)
        _print_header(out, session, worktree, worker, evaluator, scripted, environment)
        label = "scripted model" if scripted else ""
        recorder = Recorder(session, worktree, settings)
        shown: AbstractContextManager[Progress] = (
            nullcontext(progress) if progress is not None else (progress_for or _silent)(label)
        )
        with shown as progress, _closing(recorder):
            ctx = RunContext(
                session=session,
                settings=settings,
                worktree=worktree,
                worker=worker,
                evaluator=evaluator,
                recorder=recorder,
                progress=progress,
                scripted=scripted,
                started=started,
                environment=environment,
                on_delta=progress.on_delta,
                sandbox=sandbox_for(
                    settings,
                    worktree,
                    session_dir=session.dir,
                    source=session.source,
                    readable=environment.readable_paths(),
                    # The gate runs this environment: the worker may use it, not change it.
                    read_only=[environment.venv]
                    if environment.venv and environment.kind == "worktree-venv"
                    else [],
                ),
            )
            _attempts(ctx, models, partial(drive, write_page=write_page))
            stop = run_loop(ctx)
        chat = _write_page(session, out, write_page)
    out.stdout_to_stderr()  # when stdout's reader went away, the summary still shows
    print_run_summary(out, session, settings, stop, time.monotonic() - started, chat, scripted)
    return stop


ProgressFactory = Callable[[str], AbstractContextManager[Progress]]
"""Makes a run's progress sink from its label ("scripted model" or "")."""

PageWriter = Callable[[Session], Path]
"""Writes a session's ``chat.html`` and returns its path (``tilth.ui.visualize.page``'s writer)."""


def _silent(label: str) -> AbstractContextManager[Progress]:
    return nullcontext(SilentProgress())


def _attempts(ctx: RunContext, models: tuple[Model, Model] | None, drive: Any) -> None:
    """An attempt session runs its one task; a best-of-N run tries each task N times."""
    from dataclasses import replace

    from tilth.agent.pipeline import run_task
    from tilth.attempts.parallel import attempt_note, attempts_runner
    from tilth.attempts.spend import SiblingSpend, UndecidedSpend
    from tilth.attempts.task import attempts_in_flight

    note = attempt_note(ctx.session)
    if note is not None:
        record = ctx.session.record().extra["attempt"]
        ctx.attempt_note = note
        ctx.only_task = str(record.get("task_id"))
        siblings = SiblingSpend(ctx.session, record)
        ctx.shared_tokens = siblings
        ctx.fork_tokens = siblings.fork_tokens()
        return
    # Attempts an earlier invocation left undecided have spent toward this session's caps.
    ctx.shared_tokens = UndecidedSpend(ctx.session)
    if ctx.settings.attempts > 1:
        ctx.task_runner = attempts_runner(
            ctx.session, ctx.settings, drive, models=models, shown=ctx.progress, started=ctx.started
        )
    elif (in_flight := attempts_in_flight(ctx.session)) is not None:
        # A best-of-N stopped half-way: its task goes on as attempts, the rest in place.
        task_id, count = in_flight
        settings = replace(ctx.settings, attempts=count)
        runner = attempts_runner(
            ctx.session, settings, drive, models=models, shown=ctx.progress, started=ctx.started
        )
        ctx.task_runner = lambda ctx, task: (
            runner(ctx, task) if task.id == task_id else run_task(ctx, task)
        )


def _log_early_stop(session: Session, exc: TilthError, *, resume: bool) -> None:
    """``stop {error}`` for a run/resume that failed before its loop (status unchanged)."""
    payload: dict[str, Any] = {
        "reason": "error",
        "phase": "resume" if resume else "run",
        "detail": exc.message,
        "error": f"{type(exc).__name__}: {exc.message}",
    }
    if isinstance(exc, SetupFailed):
        payload["output"] = exc.output
    try:
        session.log("stop", **payload)
    except (OSError, TilthError):  # a full disk, a deleted log: the error itself is shown
        pass


def check_sandbox(settings: Settings, out: Notices) -> dict[str, Any]:
    """Refuse (``required``) or warn once, loudly (``auto``), when bash cannot be sandboxed."""
    usable, detail = sandbox_status(settings)
    if not usable and settings.sandbox == "required":
        sandbox_for(settings, Path("/"))  # raises SandboxUnavailable with the hint
    if not usable and settings.sandbox == "auto":
        out.warn(unsandboxed_warning(detail))
    limits = sandbox_limits(settings) if usable else []
    if limits:
        out.warn(f"the worker's bash sandbox cannot hold here: {'; '.join(limits)}")
    return {"sandboxed": usable, "detail": detail}


def _sigterm_as_interrupt() -> AbstractContextManager[None]:
    """SIGTERM and SIGHUP stop the run like Ctrl-C: state saved, ``stop {interrupted}``,
    summary, lock released. (A closed output pipe does the same through ``IO``.)"""
    return stop_signals_interrupt()


@contextmanager
def _closing(recorder: CheckpointRecorder) -> Iterator[None]:
    """Release the recorder's file watcher (inotify handles) when the run ends."""
    try:
        yield
    finally:
        recorder.close()


def _print_header(
    out: Notices,
    session: Session,
    worktree: Path,
    worker: Model,
    evaluator: Model,
    scripted: bool,
    environment: ProjectEnv,
) -> None:
    out.say(f"session   {session.id}")
    out.say(f"worktree  {worktree}")
    out.say(f"branch    {session.branch}")
    out.say(f"tests in  {environment.description}")
    out.say(f"worker    {worker.name}")
    out.say(f"evaluator {evaluator.name}")
    if scripted:
        out.say("note      the model is SCRIPTED: canned replies, no real model involved", "yellow")


def _write_page(session: Session, out: Notices, write_page: PageWriter | None) -> Path | None:
    if write_page is None:
        return None
    try:
        return Path(write_page(session))
    except Exception as exc:  # derived output: a visualizer bug must not change the run's outcome
        out.warn(f"could not write chat.html: {type(exc).__name__}: {exc}")
        return None


def _duration(seconds: float) -> str:
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _share(value: float, cap: float) -> str:
    return f"{value / cap:.0%}" if cap else "no cap"


def print_run_summary(
    out: Notices,
    session: Session,
    settings: Settings,
    stop: Stop,
    seconds: float,
    chat: Path | None,
    scripted: bool,
) -> None:
    """The end-of-run block: where things are and how far the run got."""
    from tilth.attempts.listing import summary_lines
    from tilth.attempts.spend import undecided_spend

    counts = task_counts(session)
    # Attempts a stop left undecided spent toward the caps, though the session's own count
    # takes their spend in only when a winner is chosen.
    tokens = session.tokens_used + undecided_spend(session)
    wall = settings.max_wall_clock_minutes
    out.say("── run summary ──", style="bold")
    out.say(f"session   {session.id}" + ("  (scripted model)" if scripted else ""))
    out.say(f"branch    {session.branch}")
    out.say(f"stopped   {stop.reason}" + (f": {stop.detail}" if stop.detail else ""))
    out.say(
        f"duration  {_duration(seconds)} "
        f"({_share(seconds, wall * 60)} of TILTH_MAX_WALL_CLOCK_MINUTES={wall})"
    )
    # One rule everywhere: the cap counts the runs' tokens; the interview's are shown apart.
    interview = min(prep_tokens(session), tokens)
    runs = tokens - interview
    out.say(
        f"tokens    {runs:,} by runs ({_share(runs, settings.max_tokens)} of "
        f"TILTH_MAX_TOKENS={settings.max_tokens:,}); {tokens:,} in all with the interview's "
        f"{interview:,}"
    )
    started = f"{counts['in_progress']} in progress, " if counts["in_progress"] else ""
    out.say(
        f"tasks     {counts['total']} total: {counts['done']} done, {counts['failed']} failed, "
        f"{started}{counts['pending']} pending"
    )
    # ``running`` is what checkpoint.json keeps for a resumable stop; the process has ended,
    # and `tilth sessions` calls it stopped: say that, not "running".
    resumable = session.status == "running"
    out.say("status    stopped, resumable" if resumable else f"status    {session.status}")
    for line in summary_lines(session):
        out.say(line)
    if chat is not None:
        out.say(f"chat      {chat}")
    else:
        out.say(f"chat      run `tilth visualize {session.id}` to write chat.html")
    advice = next_step(stop, session.id)
    if advice:
        out.say(f"next      {advice}")


def next_step(stop: Stop, session_id: str) -> str | None:
    """What to do after ``stop``: never a command that would only meet the same stop."""
    if stop.reason in ("wall_clock", "token_cap"):
        setting = CAP_SETTINGS[stop.reason]
        return f"raise {setting} if needed, then: tilth resume {session_id}"
    if isinstance(stop.error, ContextTooSmall):
        return "serve the model with a larger context window (docs/models.md), then resume"
    if isinstance(stop.error, ContextOverflow):
        return (
            f"the conversation no longer fits the model's context window: shorten it with "
            f"`tilth summarize {session_id} --at <checkpoint> --direction up-to` (see "
            f"`tilth checkpoints {session_id}`), start the task afresh with `tilth restart "
            f"{session_id} <T-NNN>`, or serve the model with a larger context; then resume"
        )
    if "evaluator_silent" in stop.detail:
        return f"set a stronger TILTH_EVALUATOR_MODEL, then: tilth resume {session_id}"
    if "repeated_calls" in stop.detail:
        return f"set a stronger TILTH_WORKER_MODEL, then: tilth resume {session_id}"
    if stop.reason != "all_done":
        return f"tilth resume {session_id}"
    return None


__all__ = ["drive", "ensure_session_worktree", "print_run_summary"]
