"""``checkpoint.json``, the session record, as a typed value (``Session.record()``).

The file is parsed, checked (``tilth.session.validate.checkpoint_problem``) and brought up
to date (``tilth.session.migrations``) at the edge, in ``Session.record()``; inside the
package it travels as a ``SessionRecord``, and it is a dict again only when it is written
or shown as JSON (``to_dict()``, the same keys and values the file holds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from tilth.session.schemas import SCHEMAS

KNOWN = (
    "schema",
    "session_id",
    "source",
    "workspace",
    "branch",
    "status",
    "tokens_used",
    "started_at",
    "kind",
)


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """What ``checkpoint.json`` says about a session (SPEC §4's fields, typed)."""

    session_id: str | None
    source: str | None
    """The project the session was made from (None when it was not recorded)."""
    workspace: str | None
    """The session's worktree (None until it is made)."""
    branch: str | None
    status: str
    """One of ``tilth.session.store.STATUSES`` (``running`` when the file says none)."""
    tokens_used: int
    started_at: str | None
    kind: str
    """``run`` (the loop), ``chat``, or an attempts session's kind."""
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """Every other key (a fork's parent, an attempt's record...), read-only."""
    schema: int = SCHEMAS["session"]
    present: frozenset[str] = frozenset(KNOWN)
    """The known keys the file holds: ``to_dict()`` writes back only those."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionRecord:
        """A record from a checked, up-to-date ``checkpoint.json`` (see ``Session.record``)."""

        def text(name: str) -> str | None:
            value = data.get(name)
            return value if isinstance(value, str) else None

        schema = data.get("schema")
        return cls(
            session_id=text("session_id"),
            source=text("source"),
            workspace=text("workspace"),
            branch=text("branch"),
            status=text("status") or "running",
            tokens_used=int(data.get("tokens_used") or 0),
            started_at=text("started_at"),
            kind=text("kind") or "run",
            extra=MappingProxyType({k: v for k, v in data.items() if k not in KNOWN}),
            schema=schema if isinstance(schema, int) else SCHEMAS["session"],
            present=frozenset(k for k in KNOWN if k in data),
        )

    def to_dict(self) -> dict[str, Any]:
        """The record as ``checkpoint.json`` holds it (for writing, and for JSON output)."""
        known = {name: getattr(self, name) for name in KNOWN if name in self.present}
        return {**known, **self.extra}
