"""The functions of Tilth's library surface: find, open and list sessions; run and resume
them with injected models and a progress sink; their timeline; attempts and the queue.
``import tilth`` offers the main ones (see ``tilth.__all__`` and docs/library.md); the CLI
is a client of the same calls. Nothing here imports a front end (``tilth.cli``,
``tilth.web``, ``tilth.ui``): what only the CLI needs lives in ``tilth.cli``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilth.agent.run_context import Notices, Progress
from tilth.agent.stops import Stop
from tilth.config import Settings, load_settings
from tilth.errors import ConfigError, SessionNotFound, UsageError, WorkspaceError
from tilth.model.base import Model
from tilth.session.discovery import SessionInfo, resolve_session, sessions_for
from tilth.session.discovery import list_sessions as _list_sessions
from tilth.session.store import Session
from tilth.timeline.controller import TimelineController
from tilth.timeline.record.retention import GcReport
from tilth.timeline.rewind.plan import RewindPlan

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from tilth.attempts.pick import PickPlan
    from tilth.health.doctor import Check
    from tilth.health.repair import Problem
    from tilth.runner import PageWriter
    from tilth.seed.prepare import Prepared
    from tilth.seed.terminal import TerminalFrontend


def list_sessions(settings: Settings | None = None) -> list[SessionInfo]:
    """Every session under ``TILTH_SESSIONS_DIR``, oldest first."""
    return _list_sessions((settings or load_settings()).sessions_dir)


def open_session(
    session_id: str | None = None, settings: Settings | None = None, *, kind: str | None = None
) -> Session:
    """The session ``session_id`` (the newest one when None; ``kind="run"`` skips chats
    then); raises ``SessionNotFound``."""
    return resolve_session((settings or load_settings()).sessions_dir, session_id, kind=kind)


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


def plan_resume(session: Session, *, on_notice: Callable[[str], Any] | None = None) -> RewindPlan:
    """What ``resume`` would prepare before its loop (failed tasks retried, the FAILED
    placeholder unwound): ``render()`` is ``tilth resume --dry-run``. Only an operation a
    crash interrupted (a half-made fork: this one) is finished first (``on_notice`` hears)."""
    from tilth.agent.resume import plan_resume as plan_resume_prep
    from tilth.timeline.record.state_capture import worktree_of

    recovered = TimelineController(session).recover()
    if recovered and on_notice is not None:
        on_notice(recovered)
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


def delete_session(session: Session) -> list[str]:
    """Delete ``session``: its worktree, branch ``session/<id>`` and directory (a chat: its
    directory only), and the attempts it made (best of N). Hold ``session.lock()``.
    Returns notes on what could not be removed."""
    from tilth.attempts.spend import attempt_sessions
    from tilth.errors import SessionLocked
    from tilth.session.teardown import teardown

    notes: list[str] = []
    for child in attempt_sessions(session):
        try:
            with child.lock():
                notes += teardown(child)
        except SessionLocked:
            notes.append(f"attempt {child.id} is in use; it was kept")
    return teardown(session) + notes


def doctor_checks(
    workspace: Path, settings: Settings | None, settings_problem: ConfigError | None = None
) -> list[Check]:
    """Every ``tilth doctor`` check of ``workspace`` (``settings`` None: they did not load,
    ``settings_problem`` says why), in order."""
    from tilth.health.doctor import DoctorContext, run_checks

    return run_checks(DoctorContext(workspace, settings, settings_problem))


def diagnose_session(session: Session, source: Path | None = None) -> list[Problem]:
    """What is wrong with ``session`` on disk, each with its repair (``tilth doctor <id>``);
    ``source``: the repository, when it moved."""
    from tilth.health.repair import diagnose

    return diagnose(session, source=source)


def repair_session(session: Session, problem: Problem, source: Path | None = None) -> str:
    """Apply ``problem``'s repair (hold ``session.lock()``); returns what was done."""
    from tilth.health.repair import repair

    return repair(session, problem, source=source)


def interview(
    settings: Settings,
    source: Path,
    brief: str,
    model: Model,
    frontend: TerminalFrontend,
    *,
    on_started: Callable[[Session, Path], None],
    on_progress: Callable[[str], Any] | None = None,
    on_notice: Callable[[str, str], Any] | None = None,
) -> Prepared:
    """``tilth prep-feature``'s interview: ``model`` asks through ``frontend``, the seed is
    committed; a ``Prepared`` (``session``, ``sha``, ``notes``). ``prepare`` is the quiet one.
    ``on_progress`` hears that ``TILTH_SETUP_COMMAND`` starts in the new worktree,
    ``on_notice`` ``(kind, text)`` each model retry and cut-off reply."""
    from tilth.seed.prepare import prepare as prepare_seed

    return prepare_seed(
        settings=settings,
        source=source,
        brief=brief,
        model=model,
        frontend=frontend,
        on_started=on_started,
        on_delta=frontend.on_delta,
        on_progress=on_progress,
        on_notice=on_notice,
    )


# Attempts and the durable queue (SPEC §11).


def list_attempts(session: Session, task_id: str | None = None) -> list[dict[str, Any]]:
    """Every attempt ``session`` made (at ``task_id``): its figures, winner or not, and why."""
    from tilth.attempts.listing import list_attempts as rows

    return [row.as_dict() for row in rows(session, task_id)]


def attempts_made(session: Session) -> list[str]:
    """The ids of the attempt sessions ``session`` made (``delete_session`` deletes them)."""
    from tilth.attempts.spend import attempt_sessions

    return [child.id for child in attempt_sessions(session)]


def plan_pick(timeline: TimelineController, attempt: str) -> PickPlan:
    """What putting ``attempt`` in its task's winner's place would do (``render()``)."""
    from tilth.attempts.pick import plan_pick as planned

    return planned(timeline, attempt)


def execute_pick(timeline: TimelineController, plan: PickPlan) -> None:
    """Carry out a ``plan_pick`` plan (inside ``timeline.writing()``); undo with
    ``timeline.plan_undo()``."""
    from tilth.attempts.pick import execute_pick as execute

    execute(timeline, plan)


def enqueue_sessions(sessions: list[Session], settings: Settings | None = None) -> list[str]:
    """Put ``sessions`` on the durable queue for ``tilth worker`` processes; workflow ids."""
    from tilth.attempts import engine

    return engine.enqueue_from_outside(settings or load_settings(), sessions)


def run_worker(
    settings: Settings,
    parallel: int,
    stop: Any,
    on_line: Callable[[str], None] | None = None,
    *,
    write_page: PageWriter | None = None,
) -> None:
    """Take sessions and attempts from the durable queue, ``parallel`` at a time, until the
    ``threading.Event`` ``stop`` is set (``tilth worker``). ``on_line`` hears a line as each
    session starts and one as it stops (its reason, and what to do next); ``write_page`` as
    for ``run``."""
    from functools import partial

    from tilth.attempts import engine
    from tilth.attempts.parallel import default_driver
    from tilth.runner import drive

    driver = default_driver(partial(drive, write_page=write_page))
    if on_line is not None:
        driver = _announced(driver, on_line)
    engine.work(settings, driver, parallel=parallel, stop=stop)


def _announced(
    driver: Callable[[str, str], dict[str, Any]], on_line: Callable[[str], None]
) -> Callable[[str, str], dict[str, Any]]:
    def by_id(session_id: str, sessions_dir: str) -> dict[str, Any]:
        on_line(f"{session_id}: taken from the queue")
        try:
            result = driver(session_id, sessions_dir)
        except Exception as exc:
            on_line(f"{session_id}: failed: {type(exc).__name__}: {exc}")
            raise
        reason, detail = result.get("reason"), result.get("detail")
        line = f"{session_id}: {reason}" + (f" ({detail})" if detail else "")
        if reason != "all_done":
            line += f" → tilth resume {session_id}"
        on_line(line)
        return result

    return by_id


def run(
    session: Session,
    *,
    worker: Model | None = None,
    evaluator: Model | None = None,
    progress: Progress | None = None,
    settings: Settings | None = None,
    on_notice: Callable[[str], Any] | None = None,
    out: Notices | None = None,
    progress_for: Callable[[str], AbstractContextManager[Progress]] | None = None,
    write_page: PageWriter | None = None,
) -> Stop:
    """Run a prepared ``session`` to a stop.

    ``worker`` and ``evaluator`` are the models (by default the ones the settings name);
    ``progress`` watches the run (nothing by default; ``progress_for(label)`` makes one
    once the models are known); ``on_notice`` gets each line the CLI would have printed
    (warnings, the summary), unless ``out`` takes them (the CLI passes its ``IO``);
    ``write_page(session)`` writes ``chat.html`` after the loop (the CLI passes
    ``tilth.ui.visualize.page.write_chat_html``; none by default). No terminal is needed:
    nothing here draws on one unless a sink given does.
    """
    sinks = _Sinks(progress, progress_for, on_notice, out, write_page)
    return _drive(session, worker, evaluator, settings, sinks, False)


def resume(
    session: Session,
    *,
    worker: Model | None = None,
    evaluator: Model | None = None,
    progress: Progress | None = None,
    settings: Settings | None = None,
    on_notice: Callable[[str], Any] | None = None,
    out: Notices | None = None,
    progress_for: Callable[[str], AbstractContextManager[Progress]] | None = None,
    write_page: PageWriter | None = None,
) -> Stop:
    """Continue a stopped ``session`` (a prepared one is simply run); as ``run``."""
    if not session.dir.is_dir():
        raise SessionNotFound(f"no session {session.id} at {session.dir}")
    if session.status == "all_done" and all(t.status == "done" for t in session.tasks()):
        from tilth.agent.resume import log_finished_resume

        return Stop("all_done", log_finished_resume(session).text)
    again = session.status != "prepared"
    sinks = _Sinks(progress, progress_for, on_notice, out, write_page)
    return _drive(session, worker, evaluator, settings, sinks, again)


@dataclass
class _Sinks:
    progress: Progress | None
    progress_for: Callable[[str], AbstractContextManager[Progress]] | None
    on_notice: Callable[[str], Any] | None
    out: Notices | None
    write_page: PageWriter | None


def _drive(
    session: Session,
    worker: Model | None,
    evaluator: Model | None,
    settings: Settings | None,
    sinks: _Sinks,
    resume: bool,
) -> Stop:
    from tilth.agent.progress_sinks import LineNotices
    from tilth.runner import drive

    if (worker is None) != (evaluator is None):
        raise UsageError("pass both worker and evaluator, or neither (the settings' models)")
    models = (worker, evaluator) if worker is not None and evaluator is not None else None
    return drive(
        session,
        settings or load_settings(),
        sinks.out or LineNotices(sinks.on_notice),
        resume=resume,
        models=models,
        progress=sinks.progress,
        progress_for=sinks.progress_for,
        write_page=sinks.write_page,
    )
