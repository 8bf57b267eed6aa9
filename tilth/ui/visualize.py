"""``chat.html``: one self-contained page showing everything a session did.

The page is built from the session directory alone: ``checkpoint.json`` for the
header, ``seed-meta.json`` and ``prd.json`` for the seed and task panels, the
ledgers, and the event log read with the tolerant reader — so it is safe to
render while a run is still writing. Every piece of model or user text is
escaped; nothing is fetched from the network.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from typing import Any

from tilth.errors import SessionCorrupt
from tilth.session.events import Event
from tilth.session.files import atomic_write_text
from tilth.session.store import Session

# Importing the renderer modules registers them.
from tilth.ui import visualize_events, visualize_review  # noqa: F401
from tilth.ui.visualize_cards import render_event
from tilth.ui.visualize_html import (
    badge,
    bullets,
    collapsible,
    esc,
    json_for_script,
    pre,
    text_block,
    thousands,
    to_json,
)
from tilth.ui.visualize_style import CSS, JS

# Only the page's own script may run: an escaping slip could not execute anything.
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; "
    f"script-src 'sha256-{base64.b64encode(hashlib.sha256(JS.encode()).digest()).decode()}'"
)

FILTERS = (
    ("model", "model"),
    ("tools", "tools"),
    ("review", "tests & verdicts"),
    ("lifecycle", "tasks & stages"),
    ("timeline", "timeline"),
    ("other", "other"),
)


def write_chat_html(session: Session) -> Path:
    """Render ``session`` and write ``chat.html`` atomically; returns its path."""
    path = session.chat_html_path
    atomic_write_text(path, render_session_html(session))
    return path


def render_session_html(session: Session) -> str:
    """The whole page for ``session``."""
    report = session.events.read()
    events = report.events
    checkpoint = _checkpoint(session)
    tasks = _tasks(session)
    titles = {str(t.get("id")): str(t.get("title", "")) for t in tasks}
    scripted = any(e.type == "model_call" and e.payload.get("scripted") for e in events)
    models = sorted(
        {
            str(e.payload["model"])
            for e in events
            if e.type == "model_call" and e.payload.get("model")
        }
    )
    body = [
        _seed_panel(session.seed_meta()),
        _tasks_panel(tasks),
        _ledger_panel(session, [str(t.get("id")) for t in tasks]),
    ]
    if report.skipped:
        body.append(
            '<div class="card warn"><div class="head"><span class="title">'
            f"{len(report.skipped)} unreadable line(s) skipped</span></div>"
            f"{bullets(report.skipped)}</div>"
        )
    body.append(_stream(events, titles))
    data = {
        "session_id": session.id,
        "status": checkpoint.get("status"),
        "events": len(events),
        "types": sorted({e.type for e in events}),
        "scripted": scripted,
    }
    page = _PAGE.format(
        title=esc(f"tilth · {session.id}"),
        css=CSS,
        header=_header(session, checkpoint, len(events), scripted, models),
        body="\n".join(part for part in body if part),
        data=json_for_script(data),
        js=JS,
        csp=CSP,
    )
    return _redact_keys(page)


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<title>{title}</title>
<style>{css}</style>
</head>
<body>
{header}
<main>
{body}
</main>
<script type="application/json" id="tilth-data">{data}</script>
<script>{js}</script>
</body>
</html>
"""


def _checkpoint(session: Session) -> dict[str, Any]:
    try:
        return session.checkpoint()
    except (SessionCorrupt, OSError):
        return {}


def _tasks(session: Session) -> list[dict[str, Any]]:
    try:
        return [t for t in session.load_prd() if isinstance(t, dict)]
    except (SessionCorrupt, OSError):
        return []


def _header(
    session: Session, checkpoint: dict[str, Any], count: int, scripted: bool, models: list[str]
) -> str:
    status = str(checkpoint.get("status", "unknown"))
    tokens = thousands(checkpoint.get("tokens_used", 0))
    status_cls = {"all_done": "ok", "failed": "bad", "running": "warn"}.get(status, "")
    stats = [
        f'<span class="stat">status {badge(status, status_cls)}</span>',
        f'<span class="stat"><b>{esc(tokens)}</b> tokens</span>',
        f'<span class="stat"><b>{count}</b> events</span>',
    ]
    if scripted:
        stats.append(f'<span class="stat">model: {badge("scripted", "scripted")}</span>')
    elif models:
        stats.append(f'<span class="stat">model: <b>{esc(", ".join(models))}</b></span>')
    if checkpoint.get("branch"):
        stats.append(f'<span class="stat">branch <code>{esc(checkpoint["branch"])}</code></span>')
    boxes = "".join(
        f'<label><input type="checkbox" data-kind="{esc(kind)}" checked> {esc(label)}</label>'
        for kind, label in FILTERS
    )
    return (
        '<header class="top"><div class="row"><h1>Tilth session</h1>'
        f"<code>{esc(session.id)}</code>{''.join(stats)}</div>"
        f'<div class="controls">show: {boxes}'
        '<button type="button" id="expand-all">expand all</button>'
        '<button type="button" id="collapse-all">collapse all</button>'
        '<button type="button" id="theme-toggle">light/dark</button></div></header>'
    )


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return [str(v) for v in value if isinstance(v, str | int | float) and str(v).strip()]


def _seed_panel(meta: dict[str, Any]) -> str:
    if not meta:
        return ""
    tokens = meta.get("tokens")
    if isinstance(tokens, dict):
        tokens = sum(v for v in tokens.values() if isinstance(v, int))
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


def _tasks_panel(tasks: list[dict[str, Any]]) -> str:
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


def _ledger_panel(session: Session, task_order: list[str]) -> str:
    ledger = session.ledger
    ids = ledger.task_ids()
    ordered = [t for t in task_order if t in ids] + [t for t in ids if t not in task_order]
    if not ordered:
        return ""
    blocks = []
    for task_id in ordered:
        rows = []
        for entry in ledger.read(task_id):
            rows.append(_ledger_row(entry))
        table = (
            "<table><tr><th>when</th><th>verdict</th><th>category</th><th>concern</th></tr>"
            + "".join(rows)
            + "</table>"
        )
        blocks.append(collapsible(f"{task_id} · {len(rows)} verdict(s)", table, open_=True))
    return f'<section class="panel ledger"><h2>Ledger</h2>{"".join(blocks)}</section>'


def _ledger_row(entry: dict[str, Any]) -> str:
    """One verdict; the run loop nests it under ``verdict`` beside the case and the diff."""
    nested = entry.get("verdict")
    verdict = nested if isinstance(nested, dict) else entry
    word = str(verdict.get("verdict", "?"))
    where = " · ".join(
        f"{k} {entry[k]}" for k in ("stage", "turn") if entry.get(k) not in (None, "")
    )
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


def _stream(events: list[Event], titles: dict[str, str]) -> str:
    if not events:
        return '<p class="empty">No events recorded yet.</p>'
    out: list[str] = ['<section class="events">']
    current: str | None = None
    for event in events:
        task_id = event.payload.get("task_id")
        if isinstance(task_id, str) and task_id and task_id != current:
            current = task_id
            title = titles.get(task_id, "")
            out.append(
                f'<div class="divider" id="task-{esc(task_id)}">{esc(task_id)}'
                f"{' · ' + esc(title) if title else ''}</div>"
            )
        out.append(render_event(event))
    out.append("</section>")
    return "\n".join(out)


def _redact_keys(page: str) -> str:
    """Defence in depth: no configured API key ends up in the page, whatever was logged."""
    for name, value in os.environ.items():
        if name.upper().endswith("_API_KEY") and len(value) >= 8:
            page = page.replace(value, "[redacted]").replace(esc(value), "[redacted]")
    return page
