"""Conversation threads: one append-only ``threads/<key>.jsonl`` per actor thread.

Every message carries a stable id (``<key>#<n>``, n counting from 1 and never
reused within a thread, even after truncation) so checkpoints anchor to message
ids, not list positions. A thread file holds one JSON object per line:
``{"schema": 1, "id": ..., "message": {role, content, ...}, "meta": {...}}``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilth.session import thread_cache
from tilth.session.files import append_line, atomic_write_text
from tilth.session.schemas import SCHEMAS
from tilth.session.validate import thread_line_problem

THREAD_SCHEMA = SCHEMAS["threads"]
_KEY_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass
class StoredMessage:
    """One message of a thread with its stable id."""

    id: str
    message: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_line(self) -> str:
        return json.dumps(
            {"schema": THREAD_SCHEMA, "id": self.id, "message": self.message, "meta": self.meta},
            ensure_ascii=False,
            default=str,
        )


def message_number(message_id: str) -> int:
    """The counter part of ``<key>#<n>``."""
    return int(message_id.rsplit("#", 1)[1])


class Thread:
    """One actor's conversation, stored in ``<dir>/<key>.jsonl``."""

    def __init__(self, directory: Path, key: str) -> None:
        if not _KEY_RE.match(key):
            raise ValueError(f"bad thread key {key!r}")
        self.directory = directory
        self.key = key
        self.path = directory / f"{key}.jsonl"

    def read(self) -> list[StoredMessage]:
        """Every readable message, in order (a torn last line is skipped).

        Parsed once per process (``thread_cache``): each message comes as a copy of its
        stored dicts, so a caller that changes one changes nothing another read returns."""
        return [
            StoredMessage(
                r["id"],
                dict(r["message"]),
                dict(r["meta"]) if isinstance(r.get("meta"), dict) else {},
            )
            for r in self._records()
        ]

    def _records(self) -> list[dict[str, Any]]:
        """The stored lines as parsed (shared with later reads: never change them)."""
        return thread_cache.read_records(self.path, self.line_problem)

    def line_problem(self, record: Any) -> str | None:
        """What is wrong with one parsed line of this thread (``tilth doctor`` names it)."""
        return thread_line_problem(record, self.key)

    def messages(self) -> list[dict[str, Any]]:
        """The plain messages, ready to send to a model."""
        return [dict(r["message"]) for r in self._records()]

    def last_id(self) -> str | None:
        """Id of the newest message, or None for an empty thread."""
        records = self._records()
        return str(records[-1]["id"]) if records else None

    def _next_number(self) -> int:
        high = max((message_number(r["id"]) for r in self._records()), default=0)
        floor = self._floor()
        return max(high, floor) + 1

    def _floor_path(self) -> Path:
        return self.directory / f"{self.key}.next"

    def _floor(self) -> int:
        try:
            return int(self._floor_path().read_text().strip())
        except (OSError, ValueError):
            return 0

    def append(self, message: dict[str, Any], **meta: Any) -> StoredMessage:
        """Append one message (fsynced); returns it with its new id."""
        self.directory.mkdir(parents=True, exist_ok=True)
        stored = StoredMessage(f"{self.key}#{self._next_number()}", message, meta)
        append_line(self.path, stored.to_line(), repair=True)
        return stored

    def rewrite(self, messages: list[StoredMessage]) -> None:
        """Replace the thread atomically, keeping ids monotonic past what existed."""
        previous = self.read()
        high = max((message_number(m.id) for m in previous), default=0)
        self.directory.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self._floor_path(), str(max(high, self._floor())))
        thread_cache.forget(self.path)
        atomic_write_text(self.path, "".join(m.to_line() + "\n" for m in messages))

    def truncate_after(self, message_id: str | None) -> list[StoredMessage]:
        """Keep messages up to and including ``message_id`` (None keeps nothing).

        Returns the dropped messages. An id not in the thread raises ``KeyError``.
        """
        stored = self.read()
        if message_id is None:
            keep: list[StoredMessage] = []
        else:
            index = next((i for i, m in enumerate(stored) if m.id == message_id), None)
            if index is None:
                raise KeyError(message_id)
            keep = stored[: index + 1]
        dropped = stored[len(keep) :]
        if dropped:
            self.rewrite(keep)
        return dropped


class Threads:
    """All threads of one session (``<session>/threads/``)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def get(self, key: str) -> Thread:
        return Thread(self.directory, key)

    def keys(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.jsonl"))

    def heads(self) -> dict[str, str | None]:
        """``key → last message id`` for every thread (what a checkpoint records)."""
        return {key: self.get(key).last_id() for key in self.keys()}
