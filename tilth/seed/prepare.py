"""One prep from start to end: session, worktree, interview, seed commit, status.

``prepare`` creates the session and its worktree on ``session/<id>`` before the
interview (the source working tree is never touched), holds the session lock
throughout, and leaves the session either ``prepared`` (seed committed) or
``failed`` with a ``stop`` event saying why — never ``running``.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilth import git
from tilth.agent.context import ContextKeeper
from tilth.agent.stops import StopReason
from tilth.agent.turn import Notice
from tilth.config import Settings
from tilth.environment.worktree_setup import prepare_worktree
from tilth.errors import Interrupted, SetupFailed, TilthError
from tilth.git import worktrees as git_worktrees
from tilth.model.base import Model, OnDelta
from tilth.seed.frontend import InterviewFrontend
from tilth.seed.interview import InterviewAbort, InterviewClock, InterviewResult, run_interview
from tilth.seed.sink import FileSeedSink
from tilth.session.store import Session

PHASE = "prep-feature"


@dataclass
class Prepared:
    """A finished prep."""

    session: Session
    worktree: Path
    sha: str
    result: InterviewResult
    checkpoint_note: str | None = None
    """Set when the seed checkpoint could not be recorded (the seed itself is fine)."""
    notes: list[str] = field(default_factory=list)
    """Warnings about the worktree (submodules that could not be checked out)."""


def seed_commit_message(tasks: int, tests: int) -> str:
    """The seed commit's subject."""
    return f"seed: {tasks} task(s) + {tests} acceptance test(s)"


def prepare(
    *,
    settings: Settings,
    source: Path,
    brief: str,
    model: Model,
    frontend: InterviewFrontend,
    on_started: Callable[[Session, Path], None] = lambda session, worktree: None,
    on_delta: OnDelta | None = None,
    on_progress: Callable[[str], Any] | None = None,
    on_notice: Notice | None = None,
) -> Prepared:
    """Run a whole prep; on any failure the session is marked ``failed`` and the error raised.

    ``on_delta`` hears the interviewer's replies as they stream in; ``on_notice`` its retries
    and cut-off replies; ``on_progress`` that
    ``TILTH_SETUP_COMMAND`` starts.
    """
    clock = InterviewClock(settings.max_wall_clock_minutes)
    session = Session.create(settings.sessions_dir, source)
    with session.lock():
        try:
            return _prepare(
                session,
                settings,
                source,
                brief,
                model,
                frontend,
                on_started,
                on_delta,
                on_progress,
                on_notice,
                clock,
            )
        except KeyboardInterrupt:
            _fail(session, "interrupted", "interrupted by the user")
            raise Interrupted(
                f"interrupted; session {session.id} is marked failed",
                hint=f"discard it with `tilth reset {session.id}`",
            ) from None
        except InterviewAbort as exc:
            _fail(session, exc.reason, exc.message)
            if exc.reason == "wall_clock" and exc.hint is None:
                exc.hint = (
                    f"raise TILTH_MAX_WALL_CLOCK_MINUTES or set a faster TILTH_PREP_MODEL, "
                    f"then discard this session and prep again: `tilth reset {session.id} -y` "
                    f"and `tilth prep-feature {shlex.quote(str(source))}`"
                )
            raise
        except SetupFailed as exc:
            _fail(session, "error", exc.message, output=exc.output)
            _remove_worktree(session, source)
            raise
        except TilthError as exc:
            _fail(session, "error", exc.message)
            raise
        except Exception as exc:  # the prep boundary: record the failure, then let the CLI report
            _fail(session, "error", f"{type(exc).__name__}: {exc}")
            raise


def _prepare(
    session: Session,
    settings: Settings,
    source: Path,
    brief: str,
    model: Model,
    frontend: InterviewFrontend,
    on_started: Callable[[Session, Path], None],
    on_delta: OnDelta | None,
    on_progress: Callable[[str], Any] | None,
    on_notice: Notice | None,
    clock: InterviewClock,
) -> Prepared:
    worktree = git_worktrees.ensure_worktree(source, session.workspace_dir, session.branch)
    session.update_checkpoint(workspace=str(worktree), branch=session.branch)
    session.log(
        "session_start",
        source=str(source),
        phase=PHASE,
        worktree=str(worktree),
        branch=session.branch,
    )
    on_started(session, worktree)
    # Before the interview's first model call: a project that cannot be set up costs no tokens.
    notes = prepare_worktree(
        session, worktree, settings, why="prep", confine=None, on_progress=on_progress
    )
    result = run_interview(
        session=session,
        source=source,
        model=model,
        frontend=frontend,
        sink=FileSeedSink(session.dir, worktree),
        brief=brief,
        backoff_seconds=settings.model_backoff_seconds,
        on_delta=on_delta,
        on_notice=on_notice,
        context=ContextKeeper.for_actor(model, settings),
        max_reply_tokens=settings.max_reply_tokens,
        clock=clock,
        repeat_limit=settings.max_repeated_failures,
    )
    message = seed_commit_message(result.tasks, len(result.test_files))
    # Always a commit, even when every test already existed verbatim: it anchors reset --to-seed.
    sha = git.commit_all(worktree, message, allow_empty=True)
    assert sha is not None
    session.log(
        "session_prepared",
        tokens_used=result.tokens_used,
        interviewer_model=model.name,
        prd_entries=result.tasks,
        test_files=len(result.test_files),
    )
    session.log("seed_committed", sha=sha, branch=session.branch)
    session.set_status("prepared")
    # Only now is the seed written: a failed commit must not be preceded by "seed written".
    meta = result.meta
    frontend.show_summary(meta["tldr"], meta["open_questions"], meta["blockers"])
    checkpoint_note = _record_seed_checkpoint(session, worktree, settings)
    return Prepared(session, worktree, sha, result, checkpoint_note, notes)


def _record_seed_checkpoint(session: Session, worktree: Path, settings: Settings) -> str | None:
    """Record the seed checkpoint; a note instead of an error when it cannot be."""
    from tilth.timeline import Recorder

    try:
        Recorder(session, worktree, settings).seed()
    except (TilthError, OSError) as exc:
        return f"could not record the seed checkpoint: {exc}"
    return None


def _fail(session: Session, reason: StopReason, message: str, **extra: str) -> None:
    """Mark the session failed with a ``stop`` event; best effort, never masks the cause."""
    try:
        session.log("stop", reason=reason, error=message, phase=PHASE, **extra)
        session.set_status("failed")
    except (TilthError, OSError):
        pass


def _remove_worktree(session: Session, source: Path) -> None:
    """Take back the worktree and branch of a prep that never got going.

    The session directory stays as the record (its ``setup`` event holds the output); with
    no worktree and no seed it is not "in flight", so the next prep does not trip over it.
    """
    try:
        git_worktrees.remove_worktree(source, session.workspace_dir)
        git_worktrees.delete_branch(source, session.branch)
        session.update_checkpoint(workspace=None)
    except (TilthError, OSError):
        pass
