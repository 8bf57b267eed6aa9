"""The records beside ``checkpoint.json`` and ``prd.json``: diagnosed and repaired.

``tasks/<T-NNN>.json``, ``seed-meta.json``, the ledgers, the threads and
``worktree-env.json`` each have one validator (``tilth.session.validate``) that every
reader uses through ``tilth.session.records``; ``record_problems`` names what those
readers would refuse or skip, and each key of ``RECORD_REPAIRS`` rebuilds or drops it
from what Tilth recorded elsewhere (the checkpoints, the event log).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tilth.environment.worktree_env import RECORD as WORKTREE_ENV
from tilth.environment.worktree_env import trusted_worktree_env
from tilth.errors import SessionCorrupt
from tilth.health.event_lines import event_line_problem, repair_event_lines
from tilth.health.problem import Problem
from tilth.session.events import iter_lines, utc_now
from tilth.session.files import atomic_write_json, atomic_write_text
from tilth.session.ledger import LEDGER_SCHEMA
from tilth.session.records import (
    read_line_records,
    read_task_state,
    read_worktree_env,
    seed_meta_damage,
)
from tilth.session.store import Session
from tilth.session.validate import (
    ledger_entry_problem,
    seed_meta_problem,
    task_state_problem,
)
from tilth.timeline.record.checkpoints import list_checkpoints, read_timeline

VERDICT_FIELDS = (
    "verdict",
    "rejection_category",
    "concern",
    "evidence",
    "next_step",
    "parse_failed",
)


# ---- diagnosis --------------------------------------------------------------------------------
def record_problems(session: Session) -> list[Problem]:
    """One problem per kind of record that is damaged, naming every damaged file."""
    problems = []
    tasks = _damaged_tasks(session)
    if tasks:
        problems.append(
            Problem(
                "tasks",
                "; ".join(tasks.values()),
                "restore each damaged tasks/<T>.json from the latest checkpoint that holds a "
                "whole copy, else remove it (the task then starts its stages afresh)",
            )
        )
    seed = seed_meta_damage(session.seed_meta_path)
    if seed is not None:
        problems.append(
            Problem(
                "seed-meta",
                seed,
                "rebuild seed-meta.json from the interview's record (its write_seed call and "
                "session_prepared event)",
            )
        )
    ledgers = _damaged_lines(session.ledger.directory, "ledger", lambda _: ledger_entry_problem)
    if ledgers:
        problems.append(
            Problem(
                "ledger",
                "; ".join(ledgers),
                "rebuild each damaged ledger entry from its evaluator_verdict event (dropped "
                "when none was logged)",
            )
        )
    threads = _damaged_lines(
        session.threads.directory, "threads", lambda key: session.threads.get(key).line_problem
    )
    if threads:
        problems.append(
            Problem(
                "thread",
                "; ".join(threads),
                "drop the damaged thread lines (every other message keeps its id)",
            )
        )
    events = event_line_problem(session)
    if events is not None:
        problems.append(events)
    unreadable = read_timeline(session).problems
    if unreadable:
        # A checkpoint file torn or naming a lost state blob: nothing recorded rebuilds it.
        problems.append(
            Problem(
                "checkpoints",
                "; ".join(unreadable),
                None,
                hint="those points cannot be gone back to; every other checkpoint can "
                "(`tilth checkpoints` lists them)",
            )
        )
    env = _worktree_env_damage(session)
    if env is not None:
        problems.append(
            Problem(
                "worktree-env",
                env,
                "record the worktree's environment again: trusted only when no worker tool "
                "has run in it, else nothing in it",
            )
        )
    return problems


def _damaged_tasks(session: Session) -> dict[Path, str]:
    found: dict[Path, str] = {}
    if not session.tasks_dir.is_dir():
        return found
    for path in sorted(session.tasks_dir.glob("*.json")):
        try:
            read_task_state(path, path.stem)
        except SessionCorrupt as exc:
            found[path] = exc.message
    return found


def _damaged_lines(
    directory: Path, shown: str, problem_of: Callable[[str], Callable[[Any], str | None]]
) -> list[str]:
    out: list[str] = []
    if not directory.is_dir():
        return out
    for path in sorted(directory.glob("*.jsonl")):
        try:
            check = problem_of(path.stem)
        except ValueError:  # a file name no thread can have
            out.append(f"{shown}/{path.name}: not a thread name")
            continue
        _, bad = read_line_records(path, check)
        out += [f"{shown}/{path.name} {what}" for what in bad]
    return out


def _worktree_env_damage(session: Session) -> str | None:
    try:
        read_worktree_env(session.dir / WORKTREE_ENV)
    except SessionCorrupt as exc:
        return exc.message
    return None


# ---- repairs ----------------------------------------------------------------------------------
def _repair_tasks(session: Session, source: Path | None) -> str:
    done = []
    checkpoints = list_checkpoints(session)
    for path in _damaged_tasks(session):
        copies = [
            (cp.id, cp.state.get("tasks", {}).get(path.stem))
            for cp in checkpoints
            if isinstance(cp.state.get("tasks"), dict)
        ]
        whole = [(cp_id, c) for cp_id, c in copies if task_state_problem(c, path.stem) is None]
        if whole:
            atomic_write_json(path, whole[-1][1])
            done.append(f"restored tasks/{path.name} from {whole[-1][0]}")
        else:
            path.unlink()
            done.append(f"removed tasks/{path.name}")
    _log(session, "records_repaired", record="tasks", done=done)
    return "; ".join(done)


def _repair_seed_meta(session: Session, source: Path | None) -> str:
    events = session.events.events()
    prepared = next((e for e in reversed(events) if e.type == "session_prepared"), None)
    call = next(
        (
            e
            for e in reversed(events)
            if e.type == "tool_call" and e.payload.get("tool") == "write_seed"
        ),
        None,
    )
    args = call.payload.get("args") if call is not None else None
    args = args if isinstance(args, dict) else {}
    tokens = prepared.payload.get("tokens_used") if prepared is not None else None
    meta: dict[str, Any] = {
        "schema": 1,
        "interviewer_model": _text((prepared.payload if prepared else {}).get("interviewer_model")),
        "started_at": events[0].ts if events else None,
        "ended_at": prepared.ts if prepared is not None else None,
        "tokens": {"total": tokens if isinstance(tokens, int) else 0},
        "tldr": _text(args.get("tldr")),
        "open_questions": _texts(args.get("open_questions")),
        "blockers": _texts(args.get("blockers")),
        "scope_notes": _text(args.get("scope_notes")) or "",
        "restored_at": utc_now(),
    }
    assert seed_meta_problem(meta) is None
    atomic_write_json(session.seed_meta_path, meta)
    _log(session, "records_repaired", record="seed-meta")
    found = "the interview's write_seed call" if args else "the event log (no write_seed call)"
    return f"rebuilt seed-meta.json from {found}"


def _repair_ledgers(session: Session, source: Path | None) -> str:
    done = []
    directory = session.ledger.directory
    for path in sorted(directory.glob("*.jsonl")):
        rebuilt, mended, dropped = _rebuilt_ledger(session, path)
        if mended or dropped:
            atomic_write_text(path, "".join(line + "\n" for line in rebuilt))
            done.append(f"ledger/{path.name}: {mended} rebuilt, {dropped} dropped")
    _log(session, "records_repaired", record="ledger", done=done)
    return "; ".join(done)


def _rebuilt_ledger(session: Session, path: Path) -> tuple[list[str], int, int]:
    """The ledger's lines with each damaged one rebuilt from its verdict event (or dropped)."""
    verdicts = {
        e.payload.get("round"): e
        for e in session.events.events()
        if e.type == "evaluator_verdict" and e.payload.get("task_id") == path.stem
    }
    lines: list[str] = []
    mended = dropped = 0
    for line, _, _, complete in iter_lines(path):
        if not line.strip() or not complete:
            continue
        try:
            entry = json.loads(line)
            whole = ledger_entry_problem(entry) is None
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            whole = False
        if whole:
            lines.append(line.decode("utf-8").rstrip("\n"))
            continue
        event = verdicts.get(len(lines) + 1)
        if event is None:
            dropped += 1
            continue
        entry = {
            "schema": LEDGER_SCHEMA,
            "ts": event.ts,
            "stage": event.payload.get("stage"),
            "turn": event.payload.get("turn") or 0,
            "diff_summary": None,
            "case": None,
            "verdict": {k: event.payload[k] for k in VERDICT_FIELDS if k in event.payload},
            "restored": True,
        }
        if ledger_entry_problem(entry) is not None:
            dropped += 1
            continue
        lines.append(json.dumps(entry, ensure_ascii=False))
        mended += 1
    return lines, mended, dropped


def _repair_threads(session: Session, source: Path | None) -> str:
    done = []
    for path in sorted(session.threads.directory.glob("*.jsonl")):
        try:
            thread = session.threads.get(path.stem)
        except ValueError:
            path.unlink()
            done.append(f"removed threads/{path.name}")
            continue
        _, bad = read_line_records(path, thread.line_problem)
        if bad:
            thread.rewrite(thread.read())
            done.append(f"threads/{path.name}: dropped {len(bad)} line(s)")
    _log(session, "records_repaired", record="threads", done=done)
    return "; ".join(done)


def _repair_worktree_env(session: Session, source: Path | None) -> str:
    (session.dir / WORKTREE_ENV).unlink(missing_ok=True)
    trusted = trusted_worktree_env(session, session.workspace_dir)
    _log(session, "records_repaired", record="worktree-env", trusted=sorted(trusted))
    return f"recorded the worktree's environment again (trusted: {', '.join(trusted) or 'none'})"


def _log(session: Session, type_: str, **payload: Any) -> None:
    if session.events.path.exists():
        session.log(type_, **payload)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _texts(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


RECORD_REPAIRS: dict[str, Callable[[Session, Path | None], str]] = {
    "tasks": _repair_tasks,
    "seed-meta": _repair_seed_meta,
    "ledger": _repair_ledgers,
    "thread": _repair_threads,
    "worktree-env": _repair_worktree_env,
    "event-lines": lambda session, _source: repair_event_lines(session),
}
