"""The harness state a checkpoint fixes, typed: ``HarnessState``.

A checkpoint records ``prd.json``, every ``tasks/<T>.json``, the line count of every
ledger and of ``progress.txt``, ``tokens_used`` and the session status (docs/internals.md,
"Harness state a checkpoint fixes"). On disk that is a JSON object under the checkpoint's
``state`` key; inside the package it travels as a frozen ``HarnessState``, parsed once where
a checkpoint's state is read (``from_dict``) and a dict again only where it is written
(``to_dict``: the same keys, values and order, so old checkpoints and journals read and
write back byte for byte).

A recorded value of the wrong shape (a damaged ``prd`` list, a count that is not a number)
is not fatal: it is kept as it was recorded, written back unchanged, and named by
``problem``; its typed field reads as absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from tilth.session.task import Task, task_dicts
from tilth.session.validate import prd_problem

KNOWN = ("prd", "tasks", "ledger", "progress_lines", "tokens_used", "status")


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class HarnessState:
    """What a checkpoint says the harness files held (each field None when not recorded)."""

    prd: tuple[Task, ...] | None = None
    """``prd.json``'s tasks (None: not recorded, or recorded as missing or damaged)."""
    tasks: Mapping[str, Any] = field(default_factory=_empty)
    """``task id → tasks/<T>.json`` as stored (None where the file was unreadable)."""
    ledger: Mapping[str, int] = field(default_factory=_empty)
    """``ledger name → complete lines``."""
    progress_lines: int | None = None
    tokens_used: int | None = None
    status: str | None = None
    """The session status (``checkpoint.json`` ``status``)."""
    order: tuple[str, ...] = KNOWN
    """The keys as recorded, in order (``to_dict`` writes these and only these)."""
    damaged: Mapping[str, Any] = field(default_factory=_empty)
    """Recorded values of the wrong shape, kept as they were (see ``problem``)."""
    extra: Mapping[str, Any] = field(default_factory=_empty)
    """Keys this version does not know, kept as they were."""
    problem: str | None = None
    """What is wrong with the recorded state (None: nothing)."""

    @classmethod
    def from_dict(cls, data: Any) -> HarnessState:
        """The state a checkpoint (or a go-back journal) recorded; never raises."""
        if not isinstance(data, Mapping):
            return cls(order=(), problem=f"harness state is {type(data).__name__}, not an object")
        values: dict[str, Any] = {}
        damaged: dict[str, Any] = {}
        problems: list[str] = []
        for key in KNOWN:
            if key not in data:
                continue
            value, problem = _parse(key, data[key])
            if problem is None:
                values[key] = value
            else:
                damaged[key] = data[key]
                problems.append(f"{key}: {problem}")
        return cls(
            **values,
            order=tuple(data),
            damaged=MappingProxyType(damaged),
            extra=MappingProxyType({k: v for k, v in data.items() if k not in KNOWN}),
            problem="; ".join(problems) or None,
        )

    def to_dict(self) -> dict[str, Any]:
        """The state as a checkpoint stores it (the keys in their recorded order)."""
        out: dict[str, Any] = {}
        for key in self.order:
            if key in self.damaged:
                out[key] = self.damaged[key]
            elif key == "prd":
                out[key] = None if self.prd is None else task_dicts(self.prd)
            elif key in ("tasks", "ledger"):
                out[key] = dict(getattr(self, key))
            elif key in KNOWN:
                out[key] = getattr(self, key)
            elif key in self.extra:
                out[key] = self.extra[key]
        return out

    def has(self, key: str) -> bool:
        """True when the state records ``key`` (well-formed): a restore writes only those."""
        return key in self.order and key not in self.damaged

    def task_statuses(self) -> dict[str, str]:
        """``task id → status`` of the recorded prd ({} when none)."""
        return {task.id: task.status for task in self.prd or ()}

    def with_prd(self, prd: tuple[Task, ...]) -> HarnessState:
        """The same state with ``prd`` as its tasks."""
        return replace(self, prd=prd, order=_with_key(self.order, "prd"))

    def with_status(self, status: str) -> HarnessState:
        """The same state with session status ``status``."""
        return replace(self, status=status, order=_with_key(self.order, "status"))

    def with_tasks(self, tasks: Mapping[str, Any]) -> HarnessState:
        """The same state with ``tasks`` as its task records."""
        return replace(
            self, tasks=MappingProxyType(dict(tasks)), order=_with_key(self.order, "tasks")
        )

    def with_ledger(self, ledger: Mapping[str, int]) -> HarnessState:
        """The same state with ``ledger`` as its ledger line counts."""
        return replace(
            self, ledger=MappingProxyType(dict(ledger)), order=_with_key(self.order, "ledger")
        )


def _with_key(order: tuple[str, ...], key: str) -> tuple[str, ...]:
    return order if key in order else (*order, key)


def _parse(key: str, value: Any) -> tuple[Any, str | None]:
    """``(typed value, None)`` or ``(None, what is wrong)`` for one recorded key."""
    if key == "prd":
        return _parse_prd(value)
    if key == "tasks":
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return MappingProxyType(value), None
        return None, "not an object of task records"
    if key == "ledger":
        if isinstance(value, dict) and all(_is_int(v) for v in value.values()):
            return MappingProxyType(value), None
        return None, "not an object of line counts"
    if key in ("progress_lines", "tokens_used"):
        if value is None or _is_int(value):
            return value, None
        return None, f"{value!r} is not a whole number"
    if value is None or isinstance(value, str):
        return value, None
    return None, f"{value!r} is not text"


def _parse_prd(value: Any) -> tuple[tuple[Task, ...] | None, str | None]:
    if value is None:
        return None, None
    problem = prd_problem(value)
    if problem is not None:
        return None, problem
    tasks = tuple(Task.from_dict(entry) for entry in value)
    # A task keeps every key in its order; anything it could not hold unchanged stays raw.
    if any(list(t.to_dict().items()) != list(e.items()) for t, e in zip(tasks, value, strict=True)):
        return None, "an entry does not read back unchanged"
    return tasks, None
