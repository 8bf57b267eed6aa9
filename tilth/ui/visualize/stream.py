"""The event stream of ``chat.html``: task dividers, event cards and checkpoint markers."""

from __future__ import annotations

from collections import defaultdict

from tilth import Checkpoint
from tilth.session import Event
from tilth.ui.visualize.cards import render_event
from tilth.ui.visualize.html import esc


def event_stream(events: list[Event], titles: dict[str, str], checkpoints: list[Checkpoint]) -> str:
    """Events in order, a divider when the task changes, a marker where each checkpoint sits."""
    if not events and not checkpoints:
        return '<p class="empty">No events recorded yet.</p>'
    # A checkpoint records how far the log had got; its marker goes right after that event.
    after: dict[int, list[Checkpoint]] = defaultdict(list)
    last_seq = events[-1].seq if events else 0
    for checkpoint in checkpoints:
        after[min(checkpoint.event_seq, last_seq)].append(checkpoint)
    out: list[str] = ['<section class="events">']
    out += [checkpoint_marker(c) for c in after.pop(0, [])]
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
        out += [checkpoint_marker(c) for c in after.pop(event.seq, [])]
    for rest in after.values():  # the log was cut below these; still worth showing
        out += [checkpoint_marker(c) for c in rest]
    out.append("</section>")
    return "\n".join(out)


def checkpoint_marker(checkpoint: Checkpoint) -> str:
    """A thin line naming a place the session can return to, and the command that does it."""
    files = len(checkpoint.files_changed)
    details = [checkpoint.kind, checkpoint.where]
    if files:
        details.append(f"{files} file(s) changed")
    gaps = (
        f'<div class="meta">not captured: {esc("; ".join(checkpoint.gaps))}</div>'
        if checkpoint.gaps
        else ""
    )
    return (
        f'<div class="cp" id="{esc(checkpoint.id)}" data-kind="timeline">'
        f'<span class="flag">⚑ {esc(checkpoint.id)}</span> {esc(checkpoint.label)} '
        f'<span class="meta">{esc(" · ".join(d for d in details if d and d != "-"))}</span> '
        f"<code>tilth rewind --to {esc(checkpoint.id)}</code>{gaps}</div>"
    )
