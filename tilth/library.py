"""The functions of Tilth's library surface: find, open and list sessions; run and resume
them with injected models and a progress sink; their timeline. ``import tilth`` offers
them (see ``tilth.__all__`` and docs/library.md); the CLI is a client of the same calls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilth.agent.run_context import Notices, Progress
from tilth.agent.stops import Stop
from tilth.config import Role, Settings, load_settings
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
    from tilth.chat import ChatEngine
    from tilth.doctor import Check as Check
    from tilth.health.repair import Problem as Problem
    from tilth.model import RetryHook
    from tilth.seed.prepare import Prepared
    from tilth.seed.terminal import TerminalFrontend as TerminalFrontend
    from tilth.ui.io import IO


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


# What the CLI's own verbs need besides running (prep-feature, reset, doctor).


def is_session_id(text: str) -> bool:
    """True when ``text`` has the shape of a session id (``tilth doctor`` tells ids from paths)."""
    from tilth.session.store import is_session_id as shaped

    return shaped(text)


def is_chat(session: Session) -> bool:
    """True for a ``tilth chat`` session (no tasks, seed, worktree or branch)."""
    from tilth.chat.session import is_chat as chat

    return chat(session)


def session_source(session: Session) -> Path | None:
    """The repository ``session`` was made for (its checkpoint, else its first event)."""
    from tilth.session.teardown import recorded_source

    return recorded_source(session)


def delete_session(session: Session) -> list[str]:
    """Delete ``session``: its worktree, branch ``session/<id>`` and directory (a chat: its
    directory only), and the attempts it made (best of N). Hold ``session.lock()``.
    Returns notes on what could not be removed."""
    from tilth.attempts.listing import attempt_sessions
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


def seed_reset_warning() -> str:
    """The warning ``tilth reset --to-seed`` shows before it asks."""
    from tilth.timeline.rewind.seed_reset import CONFIRM_WARNING

    return CONFIRM_WARNING


def source_hint(session: Session) -> str:
    """The source repository to name in a hint (``<workspace>`` when the record lacks it)."""
    from tilth.timeline.rewind.seed_reset import source_hint as hint

    return hint(session)


def doctor_checks(
    workspace: Path, settings: Settings | None, settings_problem: ConfigError | None = None
) -> list[Check]:
    """Every ``tilth doctor`` check of ``workspace`` (``settings`` None: they did not load,
    ``settings_problem`` says why), in order."""
    from tilth.doctor import DoctorContext, run_checks

    return run_checks(DoctorContext(workspace, settings, settings_problem))


def checks_pass(checks: list[Check]) -> bool:
    """True when a real run could start: every required check passed."""
    from tilth.doctor import ready

    return ready(checks)


def checks_as_dicts(checks: list[Check]) -> list[dict[str, object]]:
    """The checks as JSON-ready dicts (``tilth doctor --json``)."""
    from tilth.doctor import as_dicts

    return as_dicts(checks)


def diagnose_session(session: Session, source: Path | None = None) -> list[Problem]:
    """What is wrong with ``session`` on disk, each with its repair (``tilth doctor <id>``);
    ``source``: the repository, when it moved."""
    from tilth.health.repair import diagnose

    return diagnose(session, source=source)


def repair_session(session: Session, problem: Problem, source: Path | None = None) -> str:
    """Apply ``problem``'s repair (hold ``session.lock()``); returns what was done."""
    from tilth.health.repair import repair

    return repair(session, problem, source=source)


def ensure_repository(workspace: Path) -> Path:
    """``workspace`` as a git repository's root; raises ``WorkspaceError`` otherwise.

    A session's own worktree is refused too: its repository is the user's, one level up.
    """
    from tilth import git
    from tilth.errors import WorkspaceError
    from tilth.session.store import is_session_id

    root = git.ensure_repo(workspace)
    branch = git.current_branch(root) or ""
    session_id = branch.removeprefix("session/")
    main = git.main_worktree(root) if branch.startswith("session/") else None
    if main is not None and is_session_id(session_id):
        raise WorkspaceError(
            f"{root} is the worktree of Tilth session {session_id}, not your repository",
            hint=f"give your repository instead: {main}; or continue that session with "
            f"`tilth resume {session_id}`",
        )
    return root


def has_uncommitted_changes(repository: Path) -> bool:
    """True when the repository's working tree differs from its last commit."""
    from tilth import git

    return git.is_dirty(repository)


def model_for(settings: Settings, role: Role, *, on_retry: RetryHook | None = None) -> Model:
    """The model the settings name for ``role`` (``prep``, ``worker``, ``evaluator``, ...)."""
    from tilth.model import model_for as configured

    return configured(settings, role, on_retry=on_retry)


def read_answers(path: Path) -> list[str]:
    """Interview answers from ``path``, one a line (``prep-feature --answers``)."""
    from tilth.seed.terminal import load_answers

    return load_answers(path)


def terminal_frontend(out: IO, answers: list[str] | None, source: str) -> TerminalFrontend:
    """The interview's terminal side: asks ``out``'s user, or takes ``answers`` in order."""
    from tilth.seed.terminal import TerminalFrontend

    return TerminalFrontend(out, answers, source=source)


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


def recover_torn_seed(session: Session) -> bool:
    """Roll back a seed write a crash left half done (hold ``session.lock()``)."""
    from tilth.seed.sink import recover

    return recover(session.dir)


# Attempts and the durable queue (SPEC §11).


def list_attempts(session: Session, task_id: str | None = None) -> list[dict[str, Any]]:
    """Every attempt ``session`` made (at ``task_id``): its figures, winner or not, and why."""
    from tilth.attempts.listing import list_attempts as rows

    return [row.as_dict() for row in rows(session, task_id)]


def attempts_made(session: Session) -> list[str]:
    """The ids of the attempt sessions ``session`` made (``delete_session`` deletes them)."""
    from tilth.attempts.listing import attempt_sessions

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
    settings: Settings, parallel: int, stop: Any, on_line: Callable[[str], None] | None = None
) -> None:
    """Take sessions and attempts from the durable queue, ``parallel`` at a time, until the
    ``threading.Event`` ``stop`` is set (``tilth worker``). ``on_line`` hears a line as each
    session starts and one as it stops (its reason, and what to do next)."""
    from tilth.attempts import engine
    from tilth.attempts.parallel import default_driver
    from tilth.runner import drive

    driver = default_driver(drive)
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


# The front ends the CLI starts: chat, the web UI, the demo.


def chat_directory(path: Path | str) -> Path:
    """``path`` resolved, or a ``UsageError`` saying why a chat cannot work there."""
    from tilth.chat.session import chat_directory as checked

    return checked(path)


def start_chat(settings: Settings, directory: Path, model: Model, **options: Any) -> ChatEngine:
    """A new chat session in ``directory``: its ``ChatEngine`` (``listener=``, ``confirm=``)."""
    from tilth.chat import ChatEngine

    return ChatEngine.start(settings, directory, model, **options)


def resume_chat(settings: Settings, session_id: str, model: Model, **options: Any) -> ChatEngine:
    """The ``ChatEngine`` of the chat session ``session_id``, continued."""
    from tilth.chat import ChatEngine

    return ChatEngine.resume(settings, session_id, model, **options)


def serve_web(settings: Settings, port: int, *, open_browser: bool) -> int:
    """``tilth serve``: the web UI and JSON API on 127.0.0.1 until interrupted."""
    from tilth.web.server import serve

    return serve(settings, port, open_browser=open_browser)


def demo_tour(out: IO, *, live: bool, keep: bool, home: Path | None) -> int:
    """``tilth demo``: the scripted story end to end on ``out`` (``live``: a real model)."""
    from tilth.demo.tour import DemoOptions, run_demo

    return run_demo(out, DemoOptions(live=live, keep=keep, home=home))


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
) -> Stop:
    """Run a prepared ``session`` to a stop.

    ``worker`` and ``evaluator`` are the models (by default the ones the settings name);
    ``progress`` watches the run (nothing by default; ``progress_for(label)`` makes one
    once the models are known); ``on_notice`` gets each line the CLI would have printed
    (warnings, the summary), unless ``out`` takes them (the CLI passes its ``IO``). No
    terminal is needed: nothing here draws on one unless a sink given does.
    """
    return _drive(
        session, worker, evaluator, settings, _Sinks(progress, progress_for, on_notice, out), False
    )


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
) -> Stop:
    """Continue a stopped ``session`` (a prepared one is simply run); as ``run``."""
    if not session.dir.is_dir():
        raise SessionNotFound(f"no session {session.id} at {session.dir}")
    if session.status == "all_done" and all(t.status == "done" for t in session.tasks()):
        from tilth.agent.resume import log_finished_resume

        return Stop("all_done", log_finished_resume(session).text)
    again = session.status != "prepared"
    sinks = _Sinks(progress, progress_for, on_notice, out)
    return _drive(session, worker, evaluator, settings, sinks, again)


@dataclass
class _Sinks:
    progress: Progress | None
    progress_for: Callable[[str], AbstractContextManager[Progress]] | None
    on_notice: Callable[[str], Any] | None
    out: Notices | None


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
    )
