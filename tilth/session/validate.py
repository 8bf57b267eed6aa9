"""One validator per persisted session file; every reader of that file uses it.

A damaged file (a hand edit, a disk error, a model that reached the session
directory) must be named, never crash a listing: ``checkpoint_problem`` and
``prd_problem`` return a one-line description of the first thing wrong, or None.
``Session.checkpoint()`` and ``Session.load_prd()`` raise ``SessionCorrupt`` with it,
``tilth sessions`` shows it as ``damaged: <what>`` and ``tilth doctor`` offers the repair.
"""

from __future__ import annotations

from typing import Any

from tilth.errors import SessionCorrupt
from tilth.session.seed_rules import TASK_ID_RE, TASK_STATUSES, TIERS, SeedRuleError, check_prd


class InvalidPrd(SessionCorrupt):
    """``prd.json`` parses but breaks a rule (a path-like id, an unknown status...):
    a one-line error naming the entry, exit 2, before any model call (SPEC §5.2)."""

    exit_code = 2


SESSION_STATUSES: tuple[str, ...] = ("prepared", "running", "all_done", "failed")

_TEXT_FIELDS = ("session_id", "source", "workspace", "branch", "started_at", "kind")


def checkpoint_problem(data: Any) -> str | None:
    """What is wrong with a parsed ``checkpoint.json``, or None."""
    if not isinstance(data, dict):
        return "not a JSON object"
    for name in _TEXT_FIELDS:
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            return f"{name} is {_shown(value)}, not text"
    status = data.get("status")
    if status is not None and status not in SESSION_STATUSES:
        return f"status is {_shown(status)}, not one of {', '.join(SESSION_STATUSES)}"
    tokens = data.get("tokens_used")
    whole = isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0
    if tokens is not None and not whole:
        return f"tokens_used is {_shown(tokens)}, not a whole number"
    return None


def prd_problem(data: Any, *, seed_rules: bool = False) -> str | None:
    """What is wrong with a parsed ``prd.json``, or None.

    Every reader checks the shape (a list of objects, safe and unique ids, known statuses,
    text where text belongs); with ``seed_rules`` (before a run, and the doctor) the whole
    seed rules too (required keys, a non-empty list, acceptance criteria).
    """
    if seed_rules:
        try:
            check_prd(data)
        except SeedRuleError as exc:
            return exc.message
    if not isinstance(data, list):
        return "not a JSON list of tasks"
    seen: set[str] = set()
    for index, entry in enumerate(data):
        where = f"entry #{index + 1}"
        if not isinstance(entry, dict):
            return f"{where} is not an object"
        task_id = entry.get("id")
        if not isinstance(task_id, str) or not TASK_ID_RE.match(task_id):
            return f"{where}: task id {_shown(task_id)} does not match T-NNN (3+ digits)"
        if task_id in seen:
            return f"{where}: duplicate task id {task_id}"
        seen.add(task_id)
        for name in ("title", "description"):
            if name in entry and not isinstance(entry[name], str):
                return f"task {task_id}: {name} is {_shown(entry[name])}, not text"
        criteria = entry.get("acceptance_criteria", [])
        if not isinstance(criteria, list):
            return f"task {task_id}: acceptance_criteria is {_shown(criteria)}, not a list"
        status = entry.get("status", "pending")
        if status not in TASK_STATUSES:
            return (
                f"task {task_id}: status {_shown(status)} is not one of {', '.join(TASK_STATUSES)}"
            )
        tier = entry.get("tier")
        if tier is not None and tier not in TIERS:
            return f"task {task_id}: tier {_shown(tier)} is not one of {', '.join(TIERS)}"
    return None


def journal_problem(data: Any) -> str | None:
    """What is wrong with a parsed ``timeline/journal.json`` (an interrupted go-back), or None."""
    if not isinstance(data, dict) or not isinstance(data.get("plan"), dict):
        return "not a journal (no plan)"
    if not isinstance(data.get("op_id", ""), str):
        return f"op_id is {_shown(data.get('op_id'))}, not text"
    for name in ("steps", "started", "done"):
        if not isinstance(data.get(name, []), list):
            return f"{name} is {_shown(data.get(name))}, not a list"
    return None


def _shown(value: Any) -> str:
    """A value for a one-line message, cut short."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
