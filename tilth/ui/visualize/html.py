"""Small HTML builders for ``chat.html``; every value passes through ``esc``."""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping
from typing import Any

# Fields that say who/where an event happened; shown in the card's meta strip.
SCOPE_KEYS = ("actor", "task_id", "stage", "phase", "role", "round", "turn", "iter", "attempt")
# Bookkeeping ids nobody reads in a transcript.
QUIET_KEYS = frozenset({"trace_id", "span_id", "call_id", "schema_version", "v", "op"})


def esc(value: object) -> str:
    """``value`` as text safe inside HTML content and attributes."""
    return html.escape(str(value), quote=True)


def to_json(value: Any) -> str:
    """Pretty JSON text of ``value`` (not yet escaped)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def json_for_script(value: Any) -> str:
    """JSON safe to place inside ``<script type="application/json">``."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


# Beyond this a single block stops being readable and only bloats the page.
BLOCK_CAP = 20_000


def clip(text: str, limit: int = BLOCK_CAP) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… [{len(text) - limit:,} more chars not shown]"


def text_block(value: object) -> str:
    return f'<div class="text">{esc(clip(str(value)))}</div>'


def pre(value: object, cls: str = "") -> str:
    attr = f' class="{esc(cls)}"' if cls else ""
    return f"<pre{attr}>{esc(clip(str(value)))}</pre>"


def collapsible(summary: str, body_html: str, cls: str = "", open_: bool = False) -> str:
    """A ``<details>`` block; ``summary`` is plain text, ``body_html`` already HTML."""
    attrs = (f' class="{esc(cls)}"' if cls else "") + (" open" if open_ else "")
    return f"<details{attrs}><summary>{esc(summary)}</summary>{body_html}</details>"


def bullets(items: Iterable[object]) -> str:
    rows = [f"<li>{esc(item)}</li>" for item in items if str(item).strip()]
    return f"<ul>{''.join(rows)}</ul>" if rows else ""


def kv(pairs: Iterable[tuple[str, object]]) -> str:
    """A definition list of the non-empty pairs (lists and dicts shown as text/JSON)."""
    rows = []
    for key, value in pairs:
        if value is None or value == "" or value == [] or value == {}:
            continue
        shown = (
            value
            if isinstance(value, str)
            else (
                ", ".join(str(v) for v in value)
                if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value)
                else to_json(value)
            )
        )
        rows.append(f"<dt>{esc(key)}</dt><dd>{esc(clip(shown))}</dd>")
    return f'<dl class="kv">{"".join(rows)}</dl>' if rows else ""


def badge(text: object, cls: str = "") -> str:
    return f'<span class="badge {esc(cls)}">{esc(text)}</span>'


def clock(ts: str) -> str:
    """``HH:MM:SS`` of an ISO timestamp (the whole string when it has no time part)."""
    if "T" in ts:
        return ts.split("T", 1)[1][:8]
    return ts


def thousands(value: object) -> str:
    try:
        return f"{int(str(value)):,}"
    except ValueError:
        return str(value)


class Fields:
    """A payload that remembers which keys a renderer used, so the rest can be listed."""

    def __init__(self, payload: Mapping[str, Any], event_type: str = "") -> None:
        self.payload = payload
        self.event_type = event_type
        self.used: set[str] = set(SCOPE_KEYS) | QUIET_KEYS
        self.requested: set[str] = set()
        """Keys a renderer asked for (already shown, so not repeated in the meta strip)."""

    def get(self, *keys: str) -> Any:
        """The first of ``keys`` that is present and not None."""
        self.used.update(keys)
        self.requested.update(keys)
        for key in keys:
            value = self.payload.get(key)
            if value is not None:
                return value
        return None

    def text(self, *keys: str) -> str | None:
        """The value as a non-blank string, or None."""
        value = self.get(*keys)
        if value is None or isinstance(value, dict | list):
            return None if value is None else to_json(value)
        text = str(value)
        return text if text.strip() else None

    def items(self, *keys: str) -> list[Any]:
        """The value as a list (a lone value becomes a one-item list)."""
        value = self.get(*keys)
        if value is None or value == "":
            return []
        return value if isinstance(value, list) else [value]

    def rest(self) -> dict[str, Any]:
        """Fields no renderer used."""
        return {k: v for k, v in self.payload.items() if k not in self.used}
