"""A session on disk: its directory layout, ``checkpoint.json`` and status.

``Session`` is the durable record; it does no git and no model I/O. Every JSON
state file is written atomically; ``checkpoint.json`` carries a schema version.
"""

from __future__ import annotations

import secrets
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from tilth.errors import ConfigError, SessionCorrupt, SessionNotFound, UsageError
from tilth.session.events import Event, EventLog, utc_now
from tilth.session.files import atomic_write_json, read_json
from tilth.session.ledger import Ledger
from tilth.session.lock import SessionLock
from tilth.session.migrations import upgrade
from tilth.session.records import read_seed_meta
from tilth.session.schemas import SCHEMAS
from tilth.session.session_record import SessionRecord
from tilth.session.task import Task, task_dicts, tasks_of
from tilth.session.threads import Threads
from tilth.session.validate import (
    SESSION_STATUSES,
    InvalidPrd,
    checkpoint_problem,
    prd_problem,
)

CHECKPOINT_SCHEMA = SCHEMAS["session"]
"""checkpoint.json's schema (see ``tilth.session.migrations``)."""
Status = Literal["prepared", "running", "all_done", "failed"]
STATUSES: tuple[str, ...] = SESSION_STATUSES

# Files a run derives; reset --to-seed deletes them.
DERIVED_FILES = ("progress.txt", "proposed-learnings.md", "summary.json", "chat.html")


def new_session_id(now: datetime | None = None) -> str:
    """``YYYYMMDD-HHMMSS-<6 hex>`` in UTC, so names sort chronologically."""
    now = now or datetime.now(UTC)
    return f"{now.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def is_session_id(text: str) -> bool:
    """True when ``text`` has the shape of a session id."""
    parts = text.split("-")
    return (
        len(parts) == 3
        and len(parts[0]) == 8
        and len(parts[1]) == 6
        and len(parts[2]) == 6
        and (parts[0] + parts[1]).isdigit()
        and all(c in "0123456789abcdef" for c in parts[2])
    )


def _next_session_id(sessions_dir: Path) -> str:
    """A new id that sorts after every existing one created in the same second.

    The hex part is random, so two sessions made within one second would otherwise
    sort in random order and "latest" could name the older one.
    """
    sid = new_session_id()
    stamp = sid[:15]
    same_second = [p.name for p in sessions_dir.glob(f"{stamp}-*") if is_session_id(p.name)]
    newest = max(same_second, default=None)
    if newest is not None and sid <= newest:
        bumped = int(newest[16:], 16) + 1 + secrets.randbelow(256)
        if bumped <= 0xFFFFFF:
            sid = f"{stamp}-{bumped:06x}"
    return sid


@dataclass
class Session:
    """One feature attempt: ``<sessions_dir>/<id>/``."""

    id: str
    dir: Path

    # ---- layout -----------------------------------------------------------------
    @property
    def checkpoint_path(self) -> Path:
        return self.dir / "checkpoint.json"

    @property
    def prd_path(self) -> Path:
        return self.dir / "prd.json"

    @property
    def seed_meta_path(self) -> Path:
        return self.dir / "seed-meta.json"

    @property
    def progress_path(self) -> Path:
        return self.dir / "progress.txt"

    @property
    def summary_path(self) -> Path:
        return self.dir / "summary.json"

    @property
    def chat_html_path(self) -> Path:
        return self.dir / "chat.html"

    @property
    def learnings_path(self) -> Path:
        return self.dir / "proposed-learnings.md"

    @property
    def workspace_dir(self) -> Path:
        """Where the worktree lives (whether or not it exists yet)."""
        return self.dir / "workspace"

    @property
    def branch(self) -> str:
        return f"session/{self.id}"

    @property
    def events(self) -> EventLog:
        return EventLog(self.dir / "events.jsonl")

    @property
    def ledger(self) -> Ledger:
        return Ledger(self.dir / "ledger")

    @property
    def threads(self) -> Threads:
        return Threads(self.dir / "threads")

    @property
    def tasks_dir(self) -> Path:
        """Per-task harness state files (``tasks/<T-NNN>.json``), written by the run loop."""
        return self.dir / "tasks"

    def lock(self) -> SessionLock:
        """The session's exclusive lock (not yet acquired).

        Taking it from an owner that was killed keeps that on record (``.lock.died`` holds
        the dead pid until the status is next set), so listings can say ``interrupted``.
        """
        return SessionLock(self.dir, self.id, on_dead_owner=self._owner_died)

    @property
    def died_path(self) -> Path:
        """Holds the pid of an owner that was killed holding the lock (see ``lock``)."""
        return self.dir / ".lock.died"

    def _owner_died(self, pid: int) -> None:
        try:
            self.died_path.write_text(str(pid))
        except OSError:
            pass

    # ---- construction -------------------------------------------------------------
    @classmethod
    def create(cls, sessions_dir: Path, source: Path, **extra: Any) -> Session:
        """Make a new session directory with an initial ``checkpoint.json``."""
        if sessions_dir.exists() and not sessions_dir.is_dir():
            raise ConfigError(
                f"the sessions directory {sessions_dir} is not a directory",
                hint="point TILTH_SESSIONS_DIR (or TILTH_HOME) at a directory",
            )
        sessions_dir.mkdir(parents=True, exist_ok=True)
        while True:
            sid = _next_session_id(sessions_dir)
            directory = sessions_dir / sid
            try:
                directory.mkdir()
                break
            except FileExistsError:
                time.sleep(0.001)
        session = cls(sid, directory)
        (directory / "events.jsonl").touch()
        atomic_write_json(
            session.checkpoint_path,
            {
                "schema": CHECKPOINT_SCHEMA,
                "session_id": sid,
                "source": str(source),
                "workspace": None,
                "branch": None,
                "status": "running",
                "tokens_used": 0,
                "started_at": utc_now(),
                "kind": "run",
                **extra,
            },
        )
        return session

    @classmethod
    def open(cls, sessions_dir: Path, session_id: str) -> Session:
        """The existing session ``session_id``; raises ``SessionNotFound``."""
        # Only id-shaped names: reset deletes what this returns, so a stray name
        # (`tilth reset Documents`) must never reach some other directory.
        if not is_session_id(session_id):
            raise UsageError(
                f"{session_id!r} is not a session id (expected YYYYMMDD-HHMMSS-<6 hex>)",
                hint="`tilth sessions` lists the sessions",
            )
        directory = sessions_dir / session_id
        if not directory.is_dir():
            raise SessionNotFound(
                f"no session {session_id} under {sessions_dir}",
                hint="`tilth sessions` lists the sessions there",
            )
        return cls(session_id, directory)

    # ---- checkpoint.json, the session record ----------------------------------------
    def record(self) -> SessionRecord:
        """``checkpoint.json``, checked and up to date; raises ``SessionCorrupt`` on garbage."""
        return SessionRecord.from_dict(self._record_data())

    def checkpoint(self) -> dict[str, Any]:
        """Deprecated: ``record().to_dict()`` (``Checkpoint`` is a point on the timeline)."""
        warnings.warn(
            "Session.checkpoint() is deprecated; use Session.record() (a SessionRecord)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._record_data()

    def _record_data(self) -> dict[str, Any]:
        try:
            data = read_json(self.checkpoint_path, what="checkpoint.json")
        except SessionCorrupt as exc:
            raise SessionCorrupt(exc.message, hint=self._doctor_hint()) from None
        except FileNotFoundError:
            raise SessionCorrupt(
                f"session {self.id} has no checkpoint.json",
                hint=f"`tilth doctor {self.id} --repair` rebuilds it from what was recorded",
            ) from None
        problem = checkpoint_problem(data)
        if problem is not None:
            raise SessionCorrupt(
                f"checkpoint.json of session {self.id}: {problem}",
                hint=f"`tilth doctor {self.id} --repair` rebuilds it from what was recorded",
            )
        return upgrade("session", data, where=f"checkpoint.json of session {self.id}")

    def update_checkpoint(self, **fields: Any) -> SessionRecord:
        """Merge ``fields`` into ``checkpoint.json`` atomically and return the result (not
        written when it holds them already: each write is two fsyncs, and a run's start, for
        one, sets the workspace and branch it has)."""
        data = self._record_data()
        if data.get("schema") == CHECKPOINT_SCHEMA and all(
            k in data and data[k] == v for k, v in fields.items()
        ):
            return SessionRecord.from_dict(data)
        data.update(fields)
        data["schema"] = CHECKPOINT_SCHEMA
        atomic_write_json(self.checkpoint_path, data)
        return SessionRecord.from_dict(data)

    @property
    def status(self) -> str:
        return self.record().status

    def set_status(self, status: Status) -> None:
        """Persist a new status (one of ``STATUSES``)."""
        if status not in STATUSES:
            raise ValueError(f"unknown session status {status!r}")
        self.update_checkpoint(status=status)
        # The session's fate was decided again: an earlier killed owner is history now.
        self.died_path.unlink(missing_ok=True)

    @property
    def source(self) -> Path | None:
        raw = self.record().source
        return Path(raw) if raw else None

    @property
    def tokens_used(self) -> int:
        return self.record().tokens_used

    def add_tokens(self, n: int) -> int:
        """Add ``n`` to the session's token total; returns the new total."""
        total = self.tokens_used + max(0, n)
        self.update_checkpoint(tokens_used=total)
        return total

    # ---- events -----------------------------------------------------------------------
    def log(self, type_: str, **payload: Any) -> Event:
        """Append one event to ``events.jsonl``.

        The log is created with the session, so a missing one was deleted: appending
        would silently start the history afresh, so that is refused instead.
        """
        if not self.events.path.exists():
            raise SessionCorrupt(
                f"events.jsonl of session {self.id} is missing (deleted?); not starting a new "
                "history silently",
                hint=f"`tilth doctor {self.id} --repair` starts a new log that records the loss",
            )
        return self.events.append(type_, payload)

    def last_stop(self) -> str | None:
        """The reason of the newest ``stop`` event, or None."""
        event = self.events.last("stop")
        return str(event.payload.get("reason")) if event else None

    # ---- prd.json -----------------------------------------------------------------------
    def load_prd(self) -> list[dict[str, Any]]:
        """The task list as ``prd.json`` holds it (for JSON output; ``tasks()`` is the typed
        one); raises ``SessionCorrupt`` if it is missing or damaged."""
        try:
            data = read_json(self.prd_path, what="prd.json")
        except SessionCorrupt as exc:
            raise SessionCorrupt(exc.message, hint=self._doctor_hint()) from None
        except FileNotFoundError:
            if self.events.last("seed_committed") is None:
                raise SessionCorrupt(
                    f"session {self.id} has no prd.json (it was never seeded)",
                    hint=f"discard it with `tilth reset {self.id}` and run `tilth prep-feature`",
                ) from None
            raise SessionCorrupt(
                f"session {self.id} has no prd.json (it was deleted)", hint=self._doctor_hint()
            ) from None
        problem = prd_problem(data)
        if problem is not None:
            where = f"prd.json of session {self.id}"
            raise InvalidPrd(f"{where}: {problem}", hint=self._doctor_hint())
        return list(data)

    def _doctor_hint(self) -> str:
        return f"`tilth doctor {self.id} --repair` restores it from the latest checkpoint"

    def save_prd(self, tasks: list[dict[str, Any]]) -> None:
        """Write ``prd.json`` atomically (entries as the file holds them)."""
        atomic_write_json(self.prd_path, tasks)

    def tasks(self) -> list[Task]:
        """The task list, typed (``load_prd`` is the same list as the file holds it)."""
        return tasks_of(self.load_prd())

    def save_tasks(self, tasks: Iterable[Task]) -> None:
        """Write ``prd.json`` atomically from typed tasks."""
        self.save_prd(task_dicts(tasks))

    def seed_meta(self) -> dict[str, Any]:
        """``seed-meta.json`` as a dict ({} if missing or malformed)."""
        return read_seed_meta(self.seed_meta_path)
