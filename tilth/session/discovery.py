"""Finding sessions: list, latest, by workspace, and resolving an optional id."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tilth.errors import SessionCorrupt, SessionNotFound, TilthError
from tilth.session.store import Session, is_session_id


@dataclass(frozen=True)
class SessionInfo:
    """One row of ``tilth sessions``."""

    id: str
    source: str | None
    status: str
    tasks_done: int
    tasks_total: int
    last_stop: str | None
    parent: str | None = None
    problem: str | None = None
    kind: str = "run"
    """``run`` (prep-feature and run) or ``chat`` (``tilth chat``)."""
    """Set when the session could not be read fully (corrupt checkpoint...)."""
    state: str | None = None
    """What is happening now (``state_of``); the recorded ``status`` when nothing more is known."""

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "source": self.source,
            "status": self.status,
            "state": self.state or self.status,
            "tasks_done": self.tasks_done,
            "tasks_total": self.tasks_total,
            "last_stop": self.last_stop,
            "parent": self.parent,
            "problem": self.problem,
            "kind": self.kind,
        }


def session_ids(sessions_dir: Path) -> list[str]:
    """Every session id under ``sessions_dir``, oldest first."""
    if not sessions_dir.is_dir():
        return []
    return sorted(p.name for p in sessions_dir.iterdir() if p.is_dir() and is_session_id(p.name))


def state_of(session: Session, status: str | None = None) -> str:
    """The status a person should see: ``running`` exactly while a live process holds it.

    A recorded ``running`` whose owner was killed (``kill -9``, a crash: its pid is left
    behind and the process is gone, or a later command found it so and noted it in
    ``.lock.died``) is ``interrupted``; one whose owner let go cleanly (Ctrl-C, a wall-clock
    or token cap: it can be resumed) is ``stopped``.
    """
    if status is None:
        try:
            status = session.status
        except (SessionCorrupt, OSError):
            return "unreadable"
    pid, alive = session.lock().owner()
    if alive:
        return "running"  # also while a resume or a go-back sets out from a recorded stop
    if status != "running":
        return status
    if pid is not None or session.died_path.exists():
        return "interrupted"
    return "stopped"


def describe(session: Session) -> SessionInfo:
    """Summarise a session for listings; never raises on a damaged session."""
    try:
        cp = session.record()
    except (SessionCorrupt, OSError) as exc:
        return SessionInfo(session.id, None, "unreadable", 0, 0, None, problem=str(exc))
    done = total = 0
    problem = None
    try:
        tasks = session.tasks()
        total = len(tasks)
        done = sum(1 for t in tasks if t.status == "done")
    except (SessionCorrupt, OSError) as exc:
        # A prepared-but-never-seeded session has no prd.json: nothing is damaged then.
        if session.prd_path.exists():
            problem = str(exc)
    problem = problem or _journal_problem(session) or _task_state_problem(session)
    status = cp.status
    return SessionInfo(
        id=session.id,
        source=cp.source,
        status=status,
        state=state_of(session, status),
        tasks_done=done,
        tasks_total=total,
        last_stop=session.last_stop(),
        parent=cp.extra.get("parent_session"),
        kind=cp.kind,
        problem=problem,
    )


def _journal_problem(session: Session) -> str | None:
    """What is wrong with an interrupted go-back's journal (None when there is none)."""
    path = session.dir / "timeline" / "journal.json"
    if not path.exists():
        return None
    from tilth.session.files import read_json
    from tilth.session.validate import journal_problem

    try:
        problem = journal_problem(read_json(path, what="the timeline journal"))
    except (SessionCorrupt, OSError) as exc:
        return str(exc)
    return None if problem is None else f"the timeline journal {path}: {problem}"


def _task_state_problem(session: Session) -> str | None:
    """The first damaged ``tasks/<T>.json`` (a resume refuses it until the doctor repairs it)."""
    if not session.tasks_dir.is_dir():
        return None
    from tilth.session.records import read_task_state

    for path in sorted(session.tasks_dir.glob("*.json")):
        try:
            read_task_state(path, path.stem)
        except (SessionCorrupt, OSError) as exc:
            return str(exc)
    return None


def list_sessions(sessions_dir: Path) -> list[SessionInfo]:
    """Describe every session, oldest first."""
    return [describe(Session(sid, sessions_dir / sid)) for sid in session_ids(sessions_dir)]


def _kind_of(session: Session) -> str:
    try:
        return session.record().kind
    except (SessionCorrupt, OSError):
        return "run"


def source_of(session: Session) -> str | None:
    """The session's recorded workspace, or None if unreadable."""
    try:
        raw = session.record().source
    except (SessionCorrupt, OSError):
        return None
    return str(raw) if raw else None


def sessions_for(
    sessions_dir: Path, source: Path, statuses: tuple[str, ...] = (), *, kind: str = "run"
) -> list[Session]:
    """Sessions of ``kind`` whose ``source`` is ``source`` (and status in ``statuses``).

    A chat in a repository is not one of its runs: ``tilth run`` never picks it up.
    """
    wanted = source.resolve()
    found = []
    for sid in session_ids(sessions_dir):
        session = Session(sid, sessions_dir / sid)
        recorded = source_of(session)
        if recorded is None or Path(recorded).resolve() != wanted:
            continue
        if _kind_of(session) != kind:
            continue
        if statuses:
            try:
                if session.status not in statuses:
                    continue
            except (SessionCorrupt, OSError):
                continue
        found.append(session)
    return found


def resolve_session(
    sessions_dir: Path,
    session_id: str | None,
    source: Path | None = None,
    *,
    kind: str | None = None,
) -> Session:
    """The named session, or the latest (for ``source`` when given, else overall).

    ``kind`` (``run`` or ``chat``): "latest" means the latest of that kind.
    """
    # An empty id is a mistake, not "latest": never resolve it to some other session.
    if session_id is not None:
        return Session.open(sessions_dir, session_id)
    if source is not None:
        mine = sessions_for(sessions_dir, source)
        if not mine:
            raise SessionNotFound(
                f"no sessions for {source.resolve()} under {sessions_dir}",
                hint=f"start one with `tilth prep-feature {source}`",
            )
        return mine[-1]
    ids = session_ids(sessions_dir)
    for found in reversed(ids):
        session = Session(found, sessions_dir / found)
        if kind is None or _kind_of(session) == kind:
            return session
    what = "sessions" if kind is None else f"{kind} sessions"
    raise SessionNotFound(
        f"no {what} found under {sessions_dir}",
        hint="start one with `tilth prep-feature <workspace>`"
        if kind != "chat"
        else "start one with `tilth chat [DIR]`",
    )


def require_session(sessions_dir: Path, session_id: str | None) -> Session:
    """Like ``resolve_session`` but with a clear error on a malformed id argument."""
    if session_id is not None and not session_id.strip():
        raise TilthError("the session id is empty")
    return resolve_session(sessions_dir, session_id)
