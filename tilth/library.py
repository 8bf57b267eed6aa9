"""The functions of Tilth's library surface: find, open and list sessions; run and resume
them with injected models and a progress sink; their timeline. ``import tilth`` offers
them (see ``tilth.__all__`` and docs/library.md); the CLI is a client of the same calls.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO, cast

from tilth.agent.run_context import Progress
from tilth.agent.stops import Stop
from tilth.config import Settings, load_settings
from tilth.errors import SessionNotFound, UsageError, WorkspaceError
from tilth.model.base import Model
from tilth.session.discovery import SessionInfo, resolve_session, sessions_for
from tilth.session.discovery import list_sessions as _list_sessions
from tilth.session.store import Session
from tilth.timeline.controller import TimelineController
from tilth.timeline.record.retention import GcReport
from tilth.timeline.rewind.plan import RewindPlan
from tilth.ui.io import IO


def list_sessions(settings: Settings | None = None) -> list[SessionInfo]:
    """Every session under ``TILTH_SESSIONS_DIR``, oldest first."""
    return _list_sessions((settings or load_settings()).sessions_dir)


def open_session(session_id: str | None = None, settings: Settings | None = None) -> Session:
    """The session ``session_id`` (the newest one when None); raises ``SessionNotFound``."""
    return resolve_session((settings or load_settings()).sessions_dir, session_id)


def sessions_of(
    workspace: str | Path, *, statuses: tuple[str, ...] = (), settings: Settings | None = None
) -> list[Session]:
    """The runs of the repository ``workspace`` (with one of ``statuses``), oldest first."""
    cfg = settings or load_settings()
    return sessions_for(cfg.sessions_dir, Path(workspace).resolve(), statuses=statuses)


def find_session(
    workspace: str | Path, *, statuses: tuple[str, ...] = (), settings: Settings | None = None
) -> Session | None:
    """The newest session of the repository ``workspace`` (with one of ``statuses``)."""
    found = sessions_of(workspace, statuses=statuses, settings=settings)
    return found[-1] if found else None


def prepare(
    workspace: str | Path,
    *,
    brief: str,
    model: Model,
    answers: list[str] | tuple[str, ...] = (),
    settings: Settings | None = None,
) -> Session:
    """Interview ``model`` about ``brief`` (``answers`` to its questions, in order) and commit
    the seed: a ``prepared`` session on its own branch; the workspace itself is untouched."""
    from tilth import git
    from tilth.seed.frontend import CannedAnswers
    from tilth.seed.prepare import prepare as prepare_seed

    cfg = settings or load_settings()
    source = git.ensure_repo(Path(workspace))
    done = prepare_seed(
        settings=cfg, source=source, brief=brief, model=model, frontend=CannedAnswers(list(answers))
    )
    return done.session


def plan_resume(session: Session) -> RewindPlan:
    """What ``resume`` would prepare before its loop (failed tasks retried, the FAILED
    placeholder unwound); nothing is written. ``render()`` is ``tilth resume --dry-run``."""
    from tilth.agent.resume import plan_resume as plan_resume_prep
    from tilth.timeline.record.state_capture import worktree_of

    TimelineController(session).recover()
    worktree = worktree_of(session)
    if not worktree.is_dir():
        raise WorkspaceError(
            f"the worktree {worktree} is missing; resume would re-create it first",
            hint=f"`tilth resume {session.id}` re-creates it",
        )
    return plan_resume_prep(session, worktree)[1]


def collect_snapshots(settings: Settings | None = None) -> GcReport:
    """Apply the snapshot retention budgets now (every session) and sweep unused blobs."""
    from tilth.timeline.record.retention import collect

    return collect(settings or load_settings())


def open_timeline(session: Session, settings: Settings | None = None) -> TimelineController:
    """The timeline controller of ``session``: checkpoints, plans, execute, undo, fork."""
    return TimelineController(session, settings)


class _Lines(io.TextIOBase):
    """A text stream that hands each complete line to ``sink`` (or drops it)."""

    def __init__(self, sink: Callable[[str], Any] | None) -> None:
        self.sink = sink
        self.buffer_text = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.buffer_text += text
        while "\n" in self.buffer_text:
            line, self.buffer_text = self.buffer_text.split("\n", 1)
            if self.sink is not None and line.strip():
                self.sink(line)
        return len(text)


def _quiet_io(on_notice: Callable[[str], Any] | None) -> IO:
    out, err = cast(TextIO, _Lines(on_notice)), cast(TextIO, _Lines(on_notice))
    return IO(stdin=io.StringIO(), stdout=out, stderr=err)


def run(
    session: Session,
    *,
    worker: Model | None = None,
    evaluator: Model | None = None,
    progress: Progress | None = None,
    settings: Settings | None = None,
    on_notice: Callable[[str], Any] | None = None,
    out: IO | None = None,
) -> Stop:
    """Run a prepared ``session`` to a stop.

    ``worker`` and ``evaluator`` are the models (by default the ones the settings name);
    ``progress`` watches the run (``SilentProgress`` by default); ``on_notice`` gets each
    line the CLI would have printed (warnings, the summary). Nothing touches a terminal
    unless ``out`` is one (the CLI passes its ``IO``: then progress is drawn there).
    """
    return _drive(session, worker, evaluator, progress, settings, on_notice, out, resume=False)


def resume(
    session: Session,
    *,
    worker: Model | None = None,
    evaluator: Model | None = None,
    progress: Progress | None = None,
    settings: Settings | None = None,
    on_notice: Callable[[str], Any] | None = None,
    out: IO | None = None,
) -> Stop:
    """Continue a stopped ``session`` (a prepared one is simply run); as ``run``."""
    if not session.dir.is_dir():
        raise SessionNotFound(f"no session {session.id} at {session.dir}")
    if session.status == "all_done" and all(t.get("status") == "done" for t in session.load_prd()):
        return Stop("all_done", "all tasks complete")
    again = session.status != "prepared"
    return _drive(session, worker, evaluator, progress, settings, on_notice, out, resume=again)


def _drive(
    session: Session,
    worker: Model | None,
    evaluator: Model | None,
    progress: Progress | None,
    settings: Settings | None,
    on_notice: Callable[[str], Any] | None,
    out: IO | None,
    *,
    resume: bool,
) -> Stop:
    from tilth.agent.progress_sinks import SilentProgress
    from tilth.runner import drive

    if (worker is None) != (evaluator is None):
        raise UsageError("pass both worker and evaluator, or neither (the settings' models)")
    models = (worker, evaluator) if worker is not None and evaluator is not None else None
    if progress is None and out is None:
        progress = SilentProgress()
    return drive(
        session,
        settings or load_settings(),
        out or _quiet_io(on_notice),
        resume=resume,
        models=models,
        progress=progress,
    )
