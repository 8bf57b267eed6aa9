"""The panels above the event stream in ``chat.html``: seed, tasks and ledger."""

from __future__ import annotations

from typing import Any

from tilth import Session
from tilth.ui.visualize.html import (
    badge,
    bullets,
    collapsible,
    esc,
    pre,
    text_block,
    thousands,
    to_json,
)


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return [str(v) for v in value if isinstance(v, str | int | float) and str(v).strip()]


def interview_tokens(tokens: Any) -> int | None:
    """The interview's total from ``seed-meta.json``'s ``tokens``: a number, or
    ``{prompt, completion, total}`` (``total`` already is prompt + completion)."""
    if isinstance(tokens, bool):
        return None
    if isinstance(tokens, int):
        return tokens
    if not isinstance(tokens, dict):
        return None
    total = tokens.get("total")
    if isinstance(total, int) and not isinstance(total, bool):
        return total
    parts = [tokens.get(k) for k in ("prompt", "completion")]
    return sum(p for p in parts if isinstance(p, int) and not isinstance(p, bool)) or None


def seed_panel(meta: dict[str, Any]) -> str:
    if not meta:
        return ""
    tokens = interview_tokens(meta.get("tokens"))
    strip = [
        str(meta["interviewer_model"]) if meta.get("interviewer_model") else None,
        f"{thousands(tokens)} tokens" if tokens is not None else None,
        f"{meta.get('started_at', '?')} → {meta.get('ended_at', '?')}"
        if meta.get("started_at") or meta.get("ended_at")
        else None,
    ]
    shown = " · ".join(s for s in strip if s) or "interview audit trail"
    parts = [f'<section class="panel seed"><h2>Seed</h2><div class="meta">{esc(shown)}</div>']
    if isinstance(meta.get("tldr"), str) and meta["tldr"].strip():
        parts.append("<h3>TL;DR</h3>" + text_block(meta["tldr"]))
    blockers = _strings(meta.get("blockers"))
    if blockers:
        parts.append(
            f'<div class="blockers"><h3>Blockers / contradictions</h3>{bullets(blockers)}</div>'
        )
    questions = _strings(meta.get("open_questions"))
    if questions:
        parts.append("<h3>Open questions</h3>" + bullets(questions))
    scope = meta.get("scope_notes")
    if isinstance(scope, str) and scope.strip():
        parts.append("<h3>Scope notes</h3>" + text_block(scope))
    elif _strings(scope):
        parts.append("<h3>Scope notes</h3>" + bullets(_strings(scope)))
    parts.append("</section>")
    return "".join(parts)


def tasks_panel(tasks: list[dict[str, Any]]) -> str:
    if not tasks:
        return ""
    rows = []
    for task in tasks:
        status = str(task.get("status", "pending"))
        criteria = _strings(task.get("acceptance_criteria"))
        detail = (
            collapsible(f"{len(criteria)} acceptance criteria", bullets(criteria))
            if criteria
            else ""
        )
        rows.append(
            f"<tr><td><code>{esc(task.get('id', '?'))}</code></td>"
            f"<td>{esc(task.get('title', ''))}{detail}</td>"
            f'<td class="status-{esc(status)}">{esc(status)}</td>'
            f"<td>{esc(task.get('tier', ''))}</td></tr>"
        )
    done = sum(1 for t in tasks if t.get("status") == "done")
    return (
        f'<section class="panel tasks"><h2>Tasks · {done}/{len(tasks)} done</h2>'
        "<table><tr><th>id</th><th>title</th><th>status</th><th>tier</th></tr>"
        f"{''.join(rows)}</table></section>"
    )


def ledger_panel(session: Session, task_order: list[str]) -> str:
    ledger = session.ledger
    ids = ledger.task_ids()
    ordered = [t for t in task_order if t in ids] + [t for t in ids if t not in task_order]
    if not ordered:
        return ""
    blocks = []
    for task_id in ordered:
        rows = []
        for number, entry in enumerate(ledger.read(task_id), start=1):
            rows.append(_ledger_row(entry, number))
        table = (
            "<table><tr><th>when</th><th>verdict</th><th>category</th><th>concern</th></tr>"
            + "".join(rows)
            + "</table>"
        )
        blocks.append(collapsible(f"{task_id} · {len(rows)} verdict(s)", table, open_=True))
    return f'<section class="panel ledger"><h2>Ledger</h2>{"".join(blocks)}</section>'


def _ledger_row(entry: dict[str, Any], number: int) -> str:
    """One verdict, the task's review ``number``; the run loop nests it under ``verdict``
    beside the case and the diff."""
    nested = entry.get("verdict")
    verdict = nested if isinstance(nested, dict) else entry
    word = str(verdict.get("verdict", "?"))
    # The review is the evaluator's turn ``number`` (as its events and checkpoint say);
    # the entry's own ``turn`` is the worker's turn count it reviewed.
    parts = [f"stage {entry['stage']}"] if entry.get("stage") not in (None, "") else []
    parts.append(f"turn {number}")
    if entry.get("turn") not in (None, ""):
        parts.append(f"after worker turn {entry['turn']}")
    where = " · ".join(parts)
    extra = ""
    if verdict.get("next_step"):
        extra += f'<div class="meta">next: {esc(verdict["next_step"])}</div>'
    if entry.get("diff_summary"):
        diff = entry["diff_summary"]
        extra += collapsible("diff reviewed", pre(diff if isinstance(diff, str) else to_json(diff)))
    return (
        f'<tr><td>{esc(entry.get("ts", ""))}<div class="meta">{esc(where)}</div></td>'
        f"<td>{badge(word, 'ok' if word == 'accept' else 'bad')}</td>"
        f"<td>{esc(verdict.get('rejection_category') or '')}</td>"
        f"<td>{esc(verdict.get('concern', ''))}{extra}</td></tr>"
    )
