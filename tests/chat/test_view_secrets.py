"""A key the secret filter knows never reaches the terminal through a chat's reply, even
split across streamed deltas, nor through a tool line (SPEC §6: no key reaches a page)."""

from __future__ import annotations

from io import StringIO

import pytest
from rich.console import Console

from tilth.chat import ChatEvent
from tilth.ui.chat.view import ChatView

KEY = "sk-live-0123456789abcdef"


def _shown(live: bool, *events: ChatEvent) -> str:
    out = StringIO()
    console = Console(file=out, width=100, force_terminal=live, color_system=None)
    view = ChatView(console, live=live)
    for event in events:
        view(event)
    view.end_block()
    return out.getvalue()


@pytest.mark.parametrize("live", [False, True], ids=["piped", "terminal"])
def test_a_key_split_over_deltas_is_redacted(monkeypatch: pytest.MonkeyPatch, live: bool) -> None:
    monkeypatch.setenv("TILTH_API_KEY", KEY)
    pieces = ["The key is ", KEY[:5], KEY[5:13], KEY[13:], " and that is all."]
    shown = _shown(
        live,
        ChatEvent("turn_started", {"turn": 1, "prompt": "what is it?"}),
        *(ChatEvent("text", {"text": piece}) for piece in pieces),
        ChatEvent("tool_started", {"name": "bash", "summary": f"bash: echo {KEY}"}),
        ChatEvent("turn_finished", {"turn": 1, "outcome": "error", "error": f"bad {KEY}"}),
    )
    assert KEY[:13] not in shown
    assert "The key is [redacted] and that is all." in shown
    assert "bash: echo [redacted]" in shown


def test_a_reply_ending_in_the_start_of_a_key_is_shown_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TILTH_API_KEY", KEY)
    shown = _shown(False, ChatEvent("text", {"text": "it starts sk-live"}))
    assert shown == "it starts sk-live\n"
