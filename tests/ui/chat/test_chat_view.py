"""The chat's terminal rendering keeps every word of a reply, HTML included."""

from __future__ import annotations

import io

from rich.console import Console

from tilth.chat.events import ChatEvent
from tilth.ui.chat.view import ChatView

REPLY = (
    "Add a <br> tag after the title, and never <script>alert(1)</script>.\n\n"
    '<div class="note">\nthe old block\n</div>\n\nKeep `x<y>` and **bold**.'
)


def test_a_live_reply_shows_html_as_written() -> None:
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=True, color_system=None)
    view = ChatView(console, live=True)
    view(ChatEvent("text", {"text": REPLY, "tokens": 10}))
    view.end_block()
    shown = out.getvalue()
    assert "Add a <br> tag after the title" in shown
    assert "<script>alert(1)</script>" in shown
    assert '<div class="note">' in shown and "the old block" in shown
    assert "x<y>" in shown and "bold" in shown and "**" not in shown
