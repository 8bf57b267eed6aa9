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
from pathlib import Path
from typing import Any

from tilth.errors import SessionCorrupt
from tilth.secret_filter import scrub
from tilth.session.files import atomic_write_text
from tilth.session.store import Session
from tilth.timeline.record.checkpoints import read_timeline

# Importing the renderer modules registers them.
from tilth.ui import visualize_events, visualize_review  # noqa: F401
from tilth.ui.visualize_html import (
    badge,
    bullets,
    esc,
    json_for_script,
    thousands,
)
from tilth.ui.visualize_panels import ledger_panel, seed_panel, tasks_panel
from tilth.ui.visualize_stream import event_stream
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
        seed_panel(session.seed_meta()),
        tasks_panel(tasks),
        ledger_panel(session, [str(t.get("id")) for t in tasks]),
    ]
    timeline = read_timeline(session)
    problems = report.skipped + timeline.problems
    if problems:
        body.append(
            '<div class="card warn"><div class="head"><span class="title">'
            f"{len(problems)} unreadable record(s) skipped</span></div>"
            f"{bullets(problems)}</div>"
        )
    body.append(event_stream(events, titles, timeline.checkpoints))
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
        header=_header(
            session, checkpoint, len(events), len(timeline.checkpoints), scripted, models
        ),
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
        return session.record().to_dict()
    except (SessionCorrupt, OSError):
        return {}


def _tasks(session: Session) -> list[dict[str, Any]]:
    try:
        return [t for t in session.load_prd() if isinstance(t, dict)]
    except (SessionCorrupt, OSError):
        return []


def _header(
    session: Session,
    checkpoint: dict[str, Any],
    count: int,
    checkpoints: int,
    scripted: bool,
    models: list[str],
) -> str:
    status = str(checkpoint.get("status", "unknown"))
    tokens = thousands(checkpoint.get("tokens_used", 0))
    status_cls = {"all_done": "ok", "failed": "bad", "running": "warn"}.get(status, "")
    stats = [
        f'<span class="stat">status {badge(status, status_cls)}</span>',
        f'<span class="stat"><b>{esc(tokens)}</b> tokens</span>',
        f'<span class="stat"><b>{count}</b> events</span>',
        f'<span class="stat"><b>{checkpoints}</b> checkpoints</span>',
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


def _redact_keys(page: str) -> str:
    """Defence in depth: no configured API key ends up in the page, whatever was logged."""
    return scrub(page)
