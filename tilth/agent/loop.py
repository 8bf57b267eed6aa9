"""The outer loop: check caps, take the next task, run its pipeline, record, repeat.

Every way out of the loop is a ``Stop``; each is logged as one ``stop`` event,
mapped to a session status and an exit code, with the records refreshed first.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tilth import git
from tilth.agent.branch_guard import require_session_branch
from tilth.agent.pipeline import run_task, set_task_status
from tilth.agent.records import append_progress, write_summary
from tilth.agent.resume import failed_subject
from tilth.agent.run_context import RunContext
from tilth.agent.stops import CAP_SETTINGS, STOP_FOR_FAILURE, Stop, StopRun, stop_reason
from tilth.errors import StorageError, TilthError
from tilth.model.call import Cancelled
from tilth.session.task import Task


def next_task(tasks: list[Task]) -> Task | None:
    """The task to work on: one interrupted mid-way first, else the first pending one."""
    for wanted in ("in_progress", "pending"):
        for task in tasks:
            if task.status == wanted:
                return task
    return None


def run_loop(ctx: RunContext) -> Stop:
    """Drive tasks until all are done or something stops the run; always logs ``stop``."""
    try:
        while True:
            ctx.check_caps()
            task = next_task(ctx.session.tasks())
            if ctx.only_task is not None and (task is None or task.id != ctx.only_task):
                return finish(ctx, Stop("all_done", f"the attempt at {ctx.only_task} is over"))
            if task is None:
                return finish(ctx, _no_open_task(ctx))
            outcome = _run_one(ctx, task)
            if outcome is not None:
                return finish(ctx, outcome)
    except StopRun as stop:
        return finish(ctx, Stop(stop_reason(stop.reason), stop.detail))
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP, a closed output pipe
        return finish(ctx, Stop("interrupted", str(exc) or "interrupted by the user (Ctrl-C)"))
    except Cancelled:  # the same, reaching an attempt's turn through its cancel token
        return finish(ctx, Stop("interrupted", "the run was interrupted"))
    except TilthError as exc:
        return finish(ctx, Stop("error", str(exc), error=exc))
    except Exception as exc:  # the loop boundary: logged as stop {error}, reported by the CLI
        return finish(ctx, Stop("error", f"unexpected {type(exc).__name__}: {exc}", error=exc))


def _run_one(ctx: RunContext, task: Task) -> Stop | None:
    """Run one task's pipeline and record its outcome; a ``Stop`` when it failed."""
    task_id, title = task.id, task.title
    ctx.progress.note(f"▶ {task_id}: {title}", style="bold")
    ctx.progress.status(task=task_id, tokens=ctx.shown_tokens())
    # Marks the task in_progress, persists every step (attempts: ``tilth.attempts``).
    outcome = (ctx.task_runner or run_task)(ctx, task)
    if outcome.status == "done":
        set_task_status(ctx.session, task_id, "done")
        append_progress(ctx.session, task_id, "done", title)
        ctx.session.log("task_done", task_id=task_id, summary=outcome.summary)
        sha = git.head(ctx.worktree)
        ctx.session.log("commit", task_id=task_id, sha=sha)
        _refresh(ctx)
        ctx.progress.note(f"✓ {task_id} done ({sha[:10]})", style="green")
        return None
    reason = outcome.reason or "error"
    set_task_status(ctx.session, task_id, "failed")
    append_progress(ctx.session, task_id, f"failed:{reason}", title)
    require_session_branch(ctx.worktree, ctx.session.branch, ctx.session.id)
    placeholder = git.commit_all(
        ctx.worktree, failed_subject(task_id, reason, title), allow_empty=True
    )
    ctx.session.log(
        "task_failed",
        task_id=task_id,
        reason=reason,
        placeholder_sha=placeholder,
        **outcome.fields,
    )
    hint = cap_hint(ctx, reason)
    ctx.progress.note(f"✗ {task_id} failed ({reason}){hint}; halting the run", style="red")
    detail = outcome.summary or ""
    if reason in STOP_FOR_FAILURE:
        detail = f"{task_id} failed ({reason}){hint}" + (f": {detail}" if detail else "")
    return Stop(STOP_FOR_FAILURE.get(reason, stop_reason(reason)), detail, task_id=task_id)


def cap_hint(ctx: RunContext, reason: str) -> str:
    """`` [SETTING=value]`` naming the cap behind ``reason`` ("" when none is)."""
    setting = CAP_SETTINGS.get(reason)
    if setting is None:
        return ""
    value = getattr(ctx.settings, setting.removeprefix("TILTH_").lower(), "?")
    return f" [{setting}={value}]"


def _no_open_task(ctx: RunContext) -> Stop:
    failed = [t.id for t in ctx.session.tasks() if t.status == "failed"]
    if failed:
        detail = f"task {failed[0]} is failed; `tilth resume {ctx.session.id}` retries it"
        return Stop("error", detail, task_id=failed[0])
    return Stop("all_done", "all tasks complete")


def finish(ctx: RunContext, stop: Stop) -> Stop:
    """Log ``stop``, set the session status and refresh the records (Ctrl-C held off)."""
    with _sigint_deferred():
        payload: dict[str, Any] = {"reason": stop.reason}
        if stop.detail:
            payload["detail"] = stop.detail
        if stop.task_id:
            payload["task_id"] = stop.task_id
        if stop.error is not None:
            payload["error"] = f"{type(stop.error).__name__}: {stop.error}"
        try:
            ctx.session.log("stop", **payload)
            ctx.session.set_status(stop.status)
        except StorageError as exc:  # a full disk: the stop cannot be recorded, only shown
            ctx.progress.note(f"could not record the stop: {exc}", style="red")
        _refresh(ctx)
        try:
            # The finished state is a place on the timeline too (fork --at latest = it).
            ctx.recorder.stop(stop.reason)
        except (OSError, TilthError) as exc:
            ctx.progress.note(f"could not record the stop checkpoint: {exc}", style="dim")
    return stop


def _refresh(ctx: RunContext) -> None:
    try:
        write_summary(ctx.session)
    except (OSError, TilthError) as exc:
        ctx.progress.note(f"summary refresh failed: {exc}", style="dim")


@contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Ignore Ctrl-C while the final state is written, so a second press cannot tear it."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: signals are not ours to juggle
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
