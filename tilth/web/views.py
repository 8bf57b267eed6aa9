"""Read-only JSON shapes of a session for the API: listings, detail, checkpoints.

Everything here only reads the session directory (through the session and
timeline libraries); a GET can never change anything.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tilth.config import Settings
from tilth.errors import SessionCorrupt, SessionNotFound, UsageError
from tilth.session.discovery import describe, session_ids, state_of
from tilth.session.lock import pid_alive
from tilth.session.records import read_task_state
from tilth.session.store import Session, is_session_id
from tilth.timeline.controller import TimelineController


def open_session(settings: Settings, session_id: str) -> Session:
    """The session named in a URL; anything that is not an existing session id is a 404."""
    if not is_session_id(session_id):
        raise SessionNotFound(
            f"no session {session_id!r}", hint="GET /api/sessions lists the sessions"
        )
    try:
        return Session.open(settings.sessions_dir, session_id)
    except UsageError as exc:
        raise SessionNotFound(exc.message, hint="GET /api/sessions lists the sessions") from None


def session_kind(record: dict[str, Any]) -> str:
    """``chat`` for a chat session, ``run`` for a seeded run."""
    return "chat" if record.get("kind") == "chat" else "run"


def sessions_list(settings: Settings) -> list[dict[str, Any]]:
    """Every session, newest first, as ``tilth sessions --json`` shows them (plus kind)."""
    out = []
    for sid in reversed(session_ids(settings.sessions_dir)):
        session = Session(sid, settings.sessions_dir / sid)
        row = describe(session).as_dict()
        try:
            record = session.record().to_dict()
        except (SessionCorrupt, OSError):
            record = {}
        row["kind"] = session_kind(record)
        row["started_at"] = record.get("started_at")
        row["title"] = _title(session, record)
        out.append(row)
    return out


def _title(session: Session, record: dict[str, Any]) -> str | None:
    """A line that says what the session is about (the seed's tldr, or a chat's first prompt)."""
    if record.get("title"):
        return str(record["title"])
    if session_kind(record) == "chat":
        from tilth.chat.session import first_prompt

        return first_prompt(session)
    tldr = session.seed_meta().get("tldr")
    if not tldr:
        return None
    # The tl;dr is Markdown: its first line, without a list bullet.
    for line in str(tldr).splitlines():
        line = line.strip()
        if line:
            return line[2:].strip() if line[:2] in ("- ", "* ") else line
    return None


def checkpoints(controller: TimelineController) -> dict[str, Any]:
    """The timeline: every checkpoint, oldest first, and the files that could not be read."""
    timeline = controller.checkpoints()
    return {
        "checkpoints": [cp.summary() for cp in timeline.checkpoints],
        "problems": timeline.problems,
    }


def _task_state(session: Session, task_id: str) -> dict[str, Any]:
    try:
        return read_task_state(session.tasks_dir / f"{task_id}.json", task_id) or {}
    except SessionCorrupt:
        return {}


def _worktree(record: dict[str, Any]) -> Path | None:
    raw = record.get("workspace")
    return Path(str(raw)) if raw else None


def tasks(session: Session, settings: Settings, record: dict[str, Any]) -> list[dict[str, Any]]:
    """The prd with each task's pipeline, completed stages and stored stage outputs."""
    from tilth.session.pipelines import stages_for
    from tilth.session.task import Task
    from tilth.timeline.rewind.restart import completed_stages_by_task

    try:
        prd = [t for t in session.load_prd() if isinstance(t, dict)]
    except SessionCorrupt:
        return []
    worktree = _worktree(record)
    done: dict[str, set[str]] = {}
    if prd and worktree is not None and worktree.is_dir():
        done = completed_stages_by_task(session, worktree)
    out = []
    for task in prd:
        task_id = str(task.get("id"))
        stages = stages_for(Task.from_dict(task), settings.default_tier)
        out.append(
            {
                **task,
                "tier": task.get("tier") or settings.default_tier,
                "stages": list(stages),
                "completed_stages": [s for s in stages if s in done.get(task_id, ())],
                "state": _task_state(session, task_id),
            }
        )
    return out


def session_detail(session: Session, settings: Settings) -> dict[str, Any]:
    """``checkpoint.json``, the tasks with their stage outputs, and the seed's metadata."""
    record = session.record().to_dict()
    kind = session_kind(record)
    return {
        "id": session.id,
        "kind": kind,
        "checkpoint": record,
        "status": record.get("status"),
        "state": state_of(session, str(record.get("status") or "")),
        "title": _title(session, record),
        "tasks": tasks(session, settings, record) if kind == "run" else [],
        "seed_meta": session.seed_meta(),
        "last_stop": session.last_stop(),
        "locked_by": lock_holder(session),
        "attempts": attempt_rows(session) if kind == "run" else [],
    }


def attempt_rows(session: Session) -> list[dict[str, Any]]:
    """Every attempt of a best-of-N run, task by task (``tilth attempts --json``)."""
    from tilth.attempts.listing import list_attempts

    return [row.as_dict() for row in list_attempts(session)]


def lock_holder(session: Session) -> int | None:
    """The pid of another process driving the session, or None (read-only: never locks).

    Taking the lock to test it, even for an instant, could make a run that starts at
    that moment fail; the holder's pid file (removed on release) is only read.
    """
    pid = session.lock().holder_pid()
    if pid is None or pid == os.getpid():
        return None  # this server's own operation in flight is not a run
    # A crashed holder leaves its pid file behind; a killed child not yet reaped is a
    # zombie, which is gone too (the run's state, read next, reaps it).
    return pid if pid_alive(pid) else None
    return pid
