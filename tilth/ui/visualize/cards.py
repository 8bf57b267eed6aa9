"""The card every ``chat.html`` event becomes, and the registry of per-type renderers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tilth.session import Event
from tilth.ui.visualize.html import SCOPE_KEYS, Fields, clock, collapsible, esc, kv


@dataclass
class Card:
    """What a renderer decided to show; ``title`` is text, ``body`` and ``badges`` HTML."""

    kind: str
    """Filter group: model, tools, review, lifecycle or timeline."""
    cls: str
    title: str
    body: str = ""
    badges: list[str] = field(default_factory=list)


Renderer = Callable[[Fields], Card]
RENDERERS: dict[str, Renderer] = {}


def renders(*types: str) -> Callable[[Renderer], Renderer]:
    def register(func: Renderer) -> Renderer:
        for type_ in types:
            RENDERERS[type_] = func
        return func

    return register


def render_event(event: Event) -> str:
    """The HTML card for one event."""
    fields = Fields(event.payload, event.type)
    renderer = RENDERERS.get(event.type, _fallback)
    card = renderer(fields)
    meta = _scope(event.payload, fields.requested)
    extras = fields.rest()
    more = collapsible("more fields", kv(sorted(extras.items())), "extras") if extras else ""
    return (
        f'<div class="card {esc(card.cls)}" id="e{event.seq}" data-kind="{esc(card.kind)}" '
        f'data-type="{esc(event.type)}">'
        f'<div class="head"><span class="title">{esc(card.title)}</span>{"".join(card.badges)}'
        f'<span class="meta">{esc(meta)}</span>'
        f'<span class="when" title="{esc(event.ts)}">#{event.seq} · {esc(clock(event.ts))}</span>'
        f"</div>{card.body}{more}</div>"
    )


def _scope(payload: dict[str, Any], shown: set[str]) -> str:
    parts = []
    for key in SCOPE_KEYS:
        value = payload.get(key)
        if value is None or value == "" or key == "task_id" or key in shown:
            continue
        numbered = key in ("turn", "iter", "attempt", "round")
        parts.append(f"{key} {value}" if numbered else str(value))
    return " · ".join(parts)


def _fallback(f: Fields) -> Card:
    body = kv(sorted(f.payload.items())) if f.payload else '<div class="empty">no payload</div>'
    f.used.update(f.payload)
    return Card("other", "unknown", "event", body)
