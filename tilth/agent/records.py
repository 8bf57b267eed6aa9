"""Derived run records: ``progress.txt`` (one line per task outcome) and ``summary.json``.

``summary.json`` is rebuilt from ``events.jsonl`` every time (never patched), so it
is always consistent with the log, including after a rewind cut the log short.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tilth.errors import SessionCorrupt
from tilth.session.events import Event
from tilth.session.files import append_line, atomic_write_json
from tilth.session.schemas import SCHEMAS
from tilth.session.store import Session

SUMMARY_SCHEMA = SCHEMAS["summary"]


def append_progress(session: Session, task_id: str, outcome: str, title: str) -> None:
    """Append ``T-NNN<TAB>done|failed:<reason><TAB>title`` to ``progress.txt``."""
    flat_title = " ".join(title.split())
    append_line(session.progress_path, f"{task_id}\t{outcome}\t{flat_title}", repair=True)


@dataclass
class _TaskRoll:
    status: str = "in_progress"
    turns: int = 0
    tokens: int = 0
    tool_calls: Counter[str] = field(default_factory=Counter)
    stages_completed: list[str] = field(default_factory=list)
    accepts: int = 0
    rejects: int = 0
    categories: Counter[str] = field(default_factory=Counter)
    failure_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "status": self.status,
            "turns": self.turns,
            "tokens": self.tokens,
            "tool_calls": dict(self.tool_calls),
            "stages_completed": self.stages_completed,
            "evaluator": {
                "accepts": self.accepts,
                "rejects": self.rejects,
                "rejection_categories": dict(self.categories),
            },
        }
        if self.failure_reason:
            data["failure_reason"] = self.failure_reason
        return data


def build_summary(session_id: str, events: list[Event]) -> dict[str, Any]:
    """Roll ``events`` up into the ``summary.json`` document (pure)."""
    tasks: dict[str, _TaskRoll] = {}
    tools: Counter[str] = Counter()
    categories: Counter[str] = Counter()
    accepts = rejects = prompt = completion = total = retries = runs = 0
    started_at = prep_started_at = last_at = None
    stop: dict[str, Any] | None = None

    def task(payload: dict[str, Any]) -> _TaskRoll | None:
        tid = payload.get("task_id")
        return tasks.setdefault(str(tid), _TaskRoll()) if tid else None

    for event in events:
        p = event.payload
        last_at = event.ts
        if event.type == "session_start":
            if p.get("phase") == "prep-feature":
                prep_started_at = event.ts
            else:
                started_at = started_at or event.ts
                runs += 1
        elif event.type == "session_resume":
            runs += 1
        elif event.type == "model_call":
            prompt += int(p.get("prompt_tokens") or 0)
            completion += int(p.get("completion_tokens") or 0)
            total = max(total, int(p.get("tokens_used_total") or 0))
            if (t := task(p)) is not None:
                t.tokens += int(p.get("prompt_tokens") or 0) + int(p.get("completion_tokens") or 0)
                if p.get("actor", "worker") == "worker":
                    t.turns += 1
        elif event.type == "model_retry":
            retries += 1
        elif event.type == "tool_call":
            name = str(p.get("tool"))
            tools[name] += 1
            if (t := task(p)) is not None:
                t.tool_calls[name] += 1
        elif event.type == "stage_completed" and (t := task(p)) is not None:
            t.stages_completed.append(str(p.get("stage")))
        elif event.type == "evaluator_verdict":
            t = task(p)
            if p.get("verdict") == "accept":
                accepts += 1
                if t is not None:
                    t.accepts += 1
            else:
                rejects += 1
                category = p.get("rejection_category")
                if isinstance(category, str) and category:
                    categories[category] += 1
                if t is not None:
                    t.rejects += 1
                    if isinstance(category, str) and category:
                        t.categories[category] += 1
        elif event.type == "task_done" and (t := task(p)) is not None:
            t.status, t.failure_reason = "done", None
        elif event.type == "task_failed" and (t := task(p)) is not None:
            t.status, t.failure_reason = "failed", str(p.get("reason"))
        elif event.type == "stop":
            stop = {"reason": p.get("reason"), "ts": event.ts}
    return {
        "version": SUMMARY_SCHEMA,
        "session_id": session_id,
        "prep_started_at": prep_started_at,
        "started_at": started_at,
        "last_event_at": last_at,
        "runs": runs,
        "tokens": {"prompt": prompt, "completion": completion, "total": total},
        "tasks": {tid: roll.as_dict() for tid, roll in tasks.items()},
        "tool_histogram": dict(tools),
        "evaluator": {
            "accepts": accepts,
            "rejects": rejects,
            "rejection_categories": dict(categories),
        },
        "model_retries": retries,
        "stop": stop,
    }


def task_counts(session: Session) -> dict[str, int]:
    """``{"total", "done", "failed", "pending", "in_progress"}`` from ``prd.json``."""
    counts = {"total": 0, "done": 0, "failed": 0, "pending": 0, "in_progress": 0}
    try:
        tasks = session.tasks()
    except (SessionCorrupt, OSError):
        return counts
    for task in tasks:
        counts["total"] += 1
        counts[task.status] = counts.get(task.status, 0) + 1
    return counts


def write_summary(session: Session) -> dict[str, Any]:
    """Rebuild ``summary.json`` from the event log (atomically) and return it."""
    summary = build_summary(session.id, session.events.events())
    summary["status"] = session.status
    summary["tokens_used"] = session.tokens_used
    summary["task_counts"] = task_counts(session)
    atomic_write_json(session.summary_path, summary)
    return summary
