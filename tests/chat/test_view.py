"""The chat's terminal rendering of engine events (plain, as piped output shows them)."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from tilth.chat import ChatEvent
from tilth.ui.chat.view import ChatView, status_text


def render(*events: ChatEvent) -> str:
    out = StringIO()
    view = ChatView(Console(file=out, width=100), live=False)
    for event in events:
        view(event)
    return out.getvalue()


def ev(type_: str, **data: object) -> ChatEvent:
    return ChatEvent(type_, data)


def test_a_turn_reads_in_order_with_tool_lines_and_a_diff() -> None:
    text = render(
        ev("turn_started", turn=1, prompt="write it\nplease", checkpoint="cp-0001"),
        ev("reasoning", text="let me think"),
        ev("text", text="Writing "),
        ev("text", text="it."),
        ev("tool_started", name="write_file", summary="write_file a.py (1 line)"),
        ev("tool_finished", name="write_file", ok=True, result="w", diff="@@ -0,0 +1 @@\n+x = 1"),
        ev("tool_started", name="bash", summary="bash: ls"),
        ev("tool_finished", name="bash", ok=True, result="a\nb\nc\nd\ne\n[exit 0]", diff=""),
        ev(
            "turn_finished",
            turn=1,
            outcome="done",
            tokens_used=1234,
            turn_tokens=34,
            files_changed=["a.py"],
        ),
    )
    assert text.splitlines() == [
        "> write it",
        "thinking...",
        "Writing it.",
        "  → write_file a.py (1 line)",
        "    @@ -0,0 +1 @@",
        "    +x = 1",
        "  → bash: ls",
        "    ... 1 more line(s)",
        "    b",
        "    c",
        "    d",
        "    e",
        "    [exit 0]",
        "── turn 1 · 1,234 tokens (34 this turn) · changed a.py",
    ]


def test_errors_refusals_and_cancels_are_one_clear_line_each() -> None:
    text = render(
        ev("tool_started", name="bash", summary="bash: sudo x"),
        ev("confirm_asked", command="sudo x", reason="sudo (commands run as root)", approved=False),
        ev("tool_finished", name="bash", ok=False, blocked=True, result="BLOCKED by the guard"),
        ev("tool_started", name="read_file", summary="read_file nope"),
        ev("tool_finished", name="read_file", ok=False, result="ERROR: no such file\nmore"),
        ev("notice", text="the model sent an empty reply"),
        ev("turn_finished", turn=2, outcome="error", error="HTTP 500", tokens_used=9),
        ev("turn_finished", turn=3, outcome="cancelled", tokens_used=9),
    )
    lines = text.splitlines()
    assert "    refused: sudo (commands run as root)" in lines
    assert "    BLOCKED by the guard" in lines
    assert "    ERROR: no such file" in lines and "more" not in text
    assert "note: the model sent an empty reply" in lines
    assert "error: HTTP 500 (the turn stopped; the chat goes on)" in lines
    assert "cancelled: the turn was interrupted" in lines


def test_model_text_cannot_drive_the_terminal() -> None:
    text = render(
        ev("text", text="a\x1b[2J\x1b]0;pwned\x07b"),
        ev("tool_started", name="bash", summary="bash: echo \x1b[31mred"),
    )
    assert "\x1b[2J" not in text and "\x1b]0;" not in text and "\x1b[31m" not in text


def test_the_status_words() -> None:
    assert status_text(3, 12345) == "turn 3 · 12,345 tokens"
    assert status_text(None, 5, 2) == "5 tokens (2 this turn)"


def test_a_retried_model_call_is_one_plain_line() -> None:
    text = render(
        ev("turn_started", turn=1, prompt="hi", checkpoint="cp-0001"),
        ev("model_retry", text="chat model call failed (HTTP 503); retry 1 in 2.0s"),
        ev("notice", text="the reply was cut at the length limit"),
        ev("text", text="Hello."),
    )
    lines = text.splitlines()
    assert "  ↻ chat model call failed (HTTP 503); retry 1 in 2.0s" in lines
    assert "note: the reply was cut at the length limit" in lines
