"""One validator per persisted session file; every reader of that file uses it.

A damaged file (a hand edit, a disk error, a model that reached the session
directory) must be named, never crash a listing: ``checkpoint_problem`` and
``prd_problem`` return a one-line description of the first thing wrong, or None.
``Session.record()`` and ``Session.load_prd()`` raise ``SessionCorrupt`` with it,
``tilth sessions`` shows it as ``damaged: <what>`` and ``tilth doctor`` offers the repair.

The other records have theirs here too, read through ``tilth.session.records``:
``task_state_problem`` (``tasks/<T-NNN>.json``), ``seed_meta_problem``,
``ledger_entry_problem`` (one line of ``ledger/<T-NNN>.jsonl``), ``thread_line_problem``
(one line of ``threads/<key>.jsonl``) and ``worktree_env_problem``.
"""

from __future__ import annotations

import re
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


def task_state_problem(data: Any, task_id: str) -> str | None:
    """What is wrong with a parsed ``tasks/<task_id>.json`` (after its migrations), or None."""
    if not TASK_ID_RE.match(task_id):
        return f"{_shown(task_id)} is not a task id (T-NNN)"
    if not isinstance(data, dict):
        return "not a JSON object"
    if data.get("task_id") != task_id:
        return f"task_id is {_shown(data.get('task_id'))}, not {task_id}"
    for name in ("base_commit", "current_stage", "feedback", "failure"):
        if data.get(name) is not None and not isinstance(data[name], str):
            return f"{name} is {_shown(data[name])}, not text"
    stages = data.get("stages_done", [])
    if not isinstance(stages, list) or not all(isinstance(s, str) for s in stages):
        return f"stages_done is {_shown(stages)}, not a list of stage names"
    if not isinstance(data.get("outputs", {}), dict):
        return f"outputs is {_shown(data.get('outputs'))}, not an object"
    for name, of in (("stage_commits", str), ("review_rejections", int)):
        value = data.get(name, {})
        if not isinstance(value, dict) or not all(
            isinstance(v, of) and not isinstance(v, bool) for v in value.values()
        ):
            return f"{name} is {_shown(value)}, not an object of {of.__name__} values"
    for name in ("rejections", "verify_failures", "turns"):
        if not _count(data.get(name, 0)):
            return f"{name} is {_shown(data.get(name))}, not a whole number"
    return None


_SEED_META_TEXT = ("interviewer_model", "started_at", "ended_at", "tldr", "scope_notes")


def seed_meta_problem(data: Any) -> str | None:
    """What is wrong with a parsed ``seed-meta.json``, or None."""
    if not isinstance(data, dict):
        return "not a JSON object"
    for name in _SEED_META_TEXT:
        if data.get(name) is not None and not isinstance(data[name], str):
            return f"{name} is {_shown(data[name])}, not text"
    for name in ("open_questions", "blockers"):
        value = data.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return f"{name} is {_shown(value)}, not a list of text"
    tokens = data.get("tokens")
    if tokens is not None and not isinstance(tokens, dict) and not _count(tokens):
        return f"tokens is {_shown(tokens)}, not a tally"
    return None


VERDICTS = ("accept", "reject")


def ledger_entry_problem(data: Any) -> str | None:
    """What is wrong with one parsed line of ``ledger/<T-NNN>.jsonl``, or None."""
    if not isinstance(data, dict):
        return "not a JSON object"
    if data.get("stage") is not None and not isinstance(data["stage"], str):
        return f"stage is {_shown(data['stage'])}, not text"
    if not _count(data.get("turn", 0)):
        return f"turn is {_shown(data.get('turn'))}, not a whole number"
    verdict = data.get("verdict")
    said = verdict.get("verdict") if isinstance(verdict, dict) else verdict
    if verdict is not None and said not in VERDICTS:
        return f"the verdict is {_shown(said)}, not accept or reject"
    return None


def thread_line_problem(data: Any, key: str) -> str | None:
    """What is wrong with one parsed line of ``threads/<key>.jsonl``, or None."""
    if not isinstance(data, dict):
        return "not a JSON object"
    message_id = data.get("id")
    if not isinstance(message_id, str) or not THREAD_ID_RE.match(message_id):
        return f"message id {_shown(message_id)} is not <key>#<n>"
    if message_id.rsplit("#", 1)[0] != key:
        return f"message id {_shown(message_id)} belongs to another thread"
    message = data.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        return "the message is not an object with a role"
    return None  # a ``meta`` that is not an object is read as {}: the message still counts


THREAD_ID_RE = re.compile(r"^[A-Za-z0-9_.-]+#[0-9]+$")


def worktree_env_problem(data: Any) -> str | None:
    """What is wrong with a parsed ``worktree-env.json``, or None."""
    if not isinstance(data, dict):
        return "not a JSON object"
    trusted = data.get("trusted")
    if not isinstance(trusted, list) or not all(isinstance(t, str) for t in trusted):
        return f"trusted is {_shown(trusted)}, not a list of names"
    if data.get("worktree") is not None and not isinstance(data["worktree"], str):
        return f"worktree is {_shown(data['worktree'])}, not text"
    return None


def _count(value: Any) -> bool:
    """True for a whole number of zero or more (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _shown(value: Any) -> str:
    """A value for a one-line message, cut short."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
