"""One way for tests to read a session: its events, status, checkpoint record, tasks and threads.

Every read goes through ``tilth.session`` (the readers Tilth itself uses) and is fresh each
call, so a test may run a command and look again. Use ``SessionView.at(dir)`` for a session
directory, ``SessionView.only(sessions_dir)`` when a test made exactly one session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tilth.session.events import Event
from tilth.session.session_record import SessionRecord
from tilth.session.store import Session


class SessionView:
    """Read-only questions about one session."""

    def __init__(self, session: Session) -> None:
        self.session = session

    @classmethod
    def at(cls, session_dir: Path) -> SessionView:
        """The session stored in ``session_dir``."""
        return cls(Session(session_dir.name, session_dir))

    @classmethod
    def only(cls, sessions_dir: Path) -> SessionView:
        """The one session under ``sessions_dir`` (a test that made several must say which)."""
        found = [p for p in sessions_dir.iterdir() if p.is_dir()]
        assert len(found) == 1, f"expected one session in {sessions_dir}, found {found}"
        return cls.at(found[0])

    @property
    def dir(self) -> Path:
        return self.session.dir

    # ---- events.jsonl -----------------------------------------------------------------------
    def events(self, type_: str | None = None) -> list[Event]:
        """Every readable event, oldest first; only those of ``type_`` when given."""
        found = self.session.events.events()
        return [e for e in found if type_ is None or e.type == type_]

    def records(self) -> list[dict[str, Any]]:
        """The events as stored: ``{"v", "seq", "ts", "type", "payload"}`` objects."""
        return [e.to_record() for e in self.events()]

    def types(self) -> list[str]:
        return [e.type for e in self.events()]

    def payloads(self, type_: str) -> list[dict[str, Any]]:
        """The payload of every ``type_`` event, oldest first."""
        return [e.payload for e in self.events(type_)]

    def stops(self) -> list[str]:
        """The reason of every ``stop`` event, oldest first."""
        return [str(p["reason"]) for p in self.payloads("stop")]

    # ---- checkpoint.json, prd.json, threads -------------------------------------------------
    def record(self) -> SessionRecord:
        return self.session.record()

    @property
    def status(self) -> str:
        return self.session.status

    def prd(self) -> list[dict[str, Any]]:
        return self.session.load_prd()

    def statuses(self) -> dict[str, str]:
        """Task id → status, as prd.json has it."""
        return {str(t["id"]): str(t.get("status", "pending")) for t in self.prd()}

    def thread(self, key: str) -> list[dict[str, Any]]:
        """The messages of thread ``key`` (summaries as stored)."""
        return [m.message for m in self.session.threads.get(key).read()]
