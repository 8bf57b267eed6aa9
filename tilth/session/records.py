"""Reading the session records whose validators live in ``tilth.session.validate``.

Every reader of ``tasks/<T-NNN>.json``, ``seed-meta.json``, the ledgers, the threads and
``worktree-env.json`` goes through here, so what one reader accepts all of them accept,
and ``tilth doctor`` names exactly what they would skip or refuse.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tilth.errors import SessionCorrupt
from tilth.session.events import iter_lines
from tilth.session.files import read_json
from tilth.session.migrations import upgrade
from tilth.session.validate import seed_meta_problem, task_state_problem, worktree_env_problem

LineProblem = Callable[[Any], "str | None"]


def read_task_state(
    path: Path, task_id: str, *, hint: str | None = None, as_stored: bool = False
) -> dict[str, Any] | None:
    """``tasks/<task_id>.json`` brought up to date and checked; None when there is none.

    ``as_stored`` returns it as the file holds it (checked all the same): a checkpoint
    records the file, so that restoring it writes back the same bytes. A damaged one
    raises ``SessionCorrupt`` naming what is wrong (``hint`` says what to do).
    """
    where = f"tasks/{task_id}.json"
    session_id = path.parent.parent.name
    hint = hint or f"`tilth doctor {session_id} --repair` restores it from the latest checkpoint"
    try:
        data = read_json(path, what=where)
    except FileNotFoundError:
        return None
    except SessionCorrupt as exc:
        raise SessionCorrupt(exc.message, hint=hint) from None
    current = upgrade("task", data, where=where) if isinstance(data, dict) else data
    problem = task_state_problem(current, task_id)
    if problem is not None:
        raise SessionCorrupt(f"{where}: {problem}", hint=hint)
    return dict(data if as_stored else current)


def seed_meta_damage(path: Path) -> str | None:
    """What is wrong with ``seed-meta.json`` (None when it is whole, or absent)."""
    try:
        problem = seed_meta_problem(read_json(path, what="seed-meta.json"))
    except FileNotFoundError:
        return None
    except SessionCorrupt as exc:
        return exc.message
    return None if problem is None else f"seed-meta.json: {problem}"


def read_seed_meta(path: Path) -> dict[str, Any]:
    """``seed-meta.json`` ({} when it is absent or damaged: it is for people, never state)."""
    try:
        data = read_json(path, what="seed-meta.json")
    except (FileNotFoundError, SessionCorrupt):
        return {}
    return dict(data) if seed_meta_problem(data) is None else {}


def read_line_records(path: Path, problem: LineProblem) -> tuple[list[dict[str, Any]], list[str]]:
    """The lines of a ``.jsonl`` record that ``problem`` accepts, and what is wrong with the
    others (``line N: what``). A torn last line (a write cut short) is skipped unreported."""
    good: list[dict[str, Any]] = []
    bad: list[str] = []
    for number, (line, _, _, complete) in enumerate(iter_lines(path), 1):
        if not line.strip() or not complete:
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            bad.append(f"line {number}: not valid JSON")
            continue
        what = problem(record)
        if what is None:
            good.append(record)
        else:
            bad.append(f"line {number}: {what}")
    return good, bad


def read_worktree_env(path: Path) -> dict[str, Any] | None:
    """``worktree-env.json`` brought up to date and checked; None when there is none."""
    try:
        data = read_json(path, what="the worktree environment record")
    except FileNotFoundError:
        return None
    if isinstance(data, dict):
        data = upgrade("worktree-env", data, where=path.name)
    problem = worktree_env_problem(data)
    if problem is not None:
        raise SessionCorrupt(f"{path.name}: {problem}")
    return dict(data)
