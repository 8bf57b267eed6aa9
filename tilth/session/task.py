"""One entry of ``prd.json`` (SPEC §4), typed: ``Task``.

``prd.json`` is parsed and checked at its one reader (``Session.tasks()``, through
``tilth.session.validate.prd_problem``); inside the package a task travels as a frozen
``Task`` and a change is a new one (``with_status``). It is a dict again only when the
list is written (``Session.save_tasks``) or shown as JSON (``to_dict()``, the same keys
and values the file holds, in the same order).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

KNOWN = ("id", "title", "description", "acceptance_criteria", "status", "tier")
OPEN_STATUSES = ("pending", "in_progress")


@dataclass(frozen=True, slots=True)
class Task:
    """A task of the feature: what to build, how it is accepted, where it stands."""

    id: str
    """``T-NNN`` (3+ digits)."""
    title: str = ""
    description: str = ""
    acceptance_criteria: tuple[Any, ...] = ()
    status: str = "pending"
    """``pending``, ``in_progress``, ``done`` or ``failed`` (``pending`` when unsaid)."""
    tier: str | None = None
    """``L1`` or ``L2``, the seed's stage pipeline tier (None: the default)."""
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """Every other key the entry holds, read-only."""
    order: tuple[str, ...] = KNOWN
    """The entry's keys in the order the file holds them (``to_dict`` keeps it)."""

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> Task:
        """A task from one checked entry of ``prd.json``."""

        def text(name: str) -> str:
            value = entry.get(name)
            return value if isinstance(value, str) else ""

        criteria = entry.get("acceptance_criteria")
        tier = entry.get("tier")
        status = entry.get("status")
        return cls(
            id=str(entry["id"]),
            title=text("title"),
            description=text("description"),
            acceptance_criteria=tuple(criteria) if isinstance(criteria, list) else (),
            status=status if isinstance(status, str) else "pending",
            tier=tier if isinstance(tier, str) else None,
            extra=MappingProxyType({k: v for k, v in entry.items() if k not in KNOWN}),
            order=tuple(entry),
        )

    def to_dict(self) -> dict[str, Any]:
        """The entry as ``prd.json`` holds it (a status set since is added at the end)."""
        out: dict[str, Any] = {}
        for key in self.order:
            if key in KNOWN:
                value = getattr(self, key)
                out[key] = list(value) if key == "acceptance_criteria" else value
            elif key in self.extra:
                out[key] = self.extra[key]
        if self.status != "pending" and "status" not in out:
            out["status"] = self.status
        return out

    def with_status(self, status: str) -> Task:
        """The same task, now ``status``."""
        return replace(self, status=status)

    @property
    def is_open(self) -> bool:
        """True while the run still has work on it (pending or in progress)."""
        return self.status in OPEN_STATUSES


def tasks_of(entries: Iterable[Mapping[str, Any]]) -> list[Task]:
    """Checked ``prd.json`` entries as tasks."""
    return [Task.from_dict(entry) for entry in entries]


def task_dicts(tasks: Iterable[Task]) -> list[dict[str, Any]]:
    """Tasks as ``prd.json`` entries (to write them, or show them as JSON)."""
    return [task.to_dict() for task in tasks]
