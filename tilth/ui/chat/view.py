"""How a chat looks in a terminal: the engine's events rendered as they arrive.

On a terminal a reply streams as live-rendered Markdown; each tool call is one line
(``→ write_file hello.py (3 lines)``) with a small coloured diff for edit tools; a dim
status line closes every turn. Without a terminal (piped, scripted) the same events
are plain text lines, in the order they happened. Model and file text is always shown
with terminal control sequences neutralised.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from rich.console import Console, Group
from rich.markdown import Markdown
from rich.segment import Segment, Segments
from rich.text import Text

from tilth.chat import ChatEvent
from tilth.secret_filter import StreamScrubber, scrub
from tilth.ui.chat.status import StatusLine, bash_preview, exit_code
from tilth.ui.io import neutralise

REFRESHES_PER_SECOND = 10
LIVE_MARGIN_ROWS = 2
"""Rows of the terminal the streaming reply leaves free (its tail follows the text)."""


def terminal_safe(text: str) -> str:
    """``text`` with escape sequences and control characters shown, never interpreted, and
    every key the secret filter knows replaced.

    The one policy of ``tilth.ui.io.neutralise`` (newlines and tabs stay).
    """
    return neutralise(scrub(text))


def reply_markdown(text: str) -> Markdown:
    """``text`` as rich Markdown, with any HTML in it shown as written.

    rich drops HTML tags and blocks from Markdown, so a reply such as "add a <br> tag"
    would lose words; a model's reply about HTML must read as the model wrote it.
    """
    rendered = Markdown(text)
    for token in rendered.parsed:
        if token.type == "html_block":
            token.type = "code_block"
        for child in token.children or []:
            if child.type == "html_inline":
                child.type = "text"
    return rendered


def status_text(turn: int | None, tokens: int, turn_tokens: int | None = None) -> str:
    """``turn 2 · 1,234 tokens (56 this turn)``: the status line's words."""
    parts = []
    if turn is not None:
        parts.append(f"turn {turn}")
    used = f"{tokens:,} tokens"
    if turn_tokens is not None:
        used += f" ({turn_tokens:,} this turn)"
    parts.append(used)
    return " · ".join(parts)


class ChatView:
    """A listener that prints a chat's events on ``console``.

    ``tokens`` tells the status line the session's token count (the engine's
    ``tokens_used``). ``hold`` keeps events back (queued, not drawn) while the person is
    at the prompt with a cancelled turn still finishing; ``release`` draws them.
    """

    def __init__(
        self,
        console: Console,
        *,
        live: bool,
        tokens: Callable[[], int] | None = None,
        errors: Console | None = None,
    ) -> None:
        self.console = console
        self.live = live
        self.errors = errors or console
        """Where a failed turn's ``error:`` line goes (stderr, so piped output stays clean)."""
        self.tokens: Callable[[], int] = tokens or (lambda: 0)
        self._text = ""
        self._secrets: StreamScrubber | None = None
        """The reply's stream through the secret filter: a key split over two deltas is
        held back until it is whole, then replaced (``end_block`` lets the rest out)."""
        self._display: Any = None
        self._status: StatusLine | None = None
        self._final = False
        self._soft_wrap = console.soft_wrap
        self._lock = threading.RLock()
        self._thinking = False
        self._held: list[ChatEvent] | None = None
        self.last_status = ""

    def __call__(self, event: ChatEvent) -> None:
        with self._lock:
            if self._held is not None:
                self._held.append(event)
                return
            handler = getattr(self, f"_on_{event.type}", None)
            if handler is not None:
                handler(event.data)

    def hold(self) -> None:
        """Keep later events back: the prompt is on the screen and must stay whole."""
        with self._lock:
            self.end_block()
            if self._held is None:
                self._held = []

    def release(self) -> None:
        """Draw the events held back, in order, and draw new ones as they come."""
        with self._lock:
            held, self._held = self._held or [], None
            for event in held:
                self(event)
            self.end_block()

    # ---- the live region: the reply as it streams, then the status line ------------------------
    def _start_live(self) -> None:
        if self._display is not None or not self.live:
            return
        from rich.live import Live

        # Lines wider than the terminal must wrap: a soft-wrapping console would let the
        # live display crop them, and the words past the edge would never be shown.
        self._soft_wrap = self.console.soft_wrap
        self.console.soft_wrap = False
        # The real width, not a stale COLUMNS: a region wider than the screen wraps in the
        # terminal, and then rich's redraws miss rows and leave copies behind.
        columns, _ = self._screen()
        self.console.width = columns
        self._final = False
        self._display = Live(
            console=self.console,
            auto_refresh=True,
            refresh_per_second=REFRESHES_PER_SECOND,
            vertical_overflow="visible",
            get_renderable=self._renderable,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._display.start()

    def _renderable(self) -> Any:
        status = self._status
        if self._final:
            return reply_markdown(self._text) if self._text else ""
        parts: list[Any] = []
        if self._text:
            parts.append(self._tail(1 if status is not None else 0))
        if status is not None:
            parts.append(status)
        return Group(*parts) if parts else ""

    def _wait(self, label: str) -> None:
        """Show the status line (``label``, a spinner, the time and tokens so far)."""
        if not self.live:
            return
        self._status = StatusLine(label, self.tokens)
        self._start_live()

    # ---- the reply text -------------------------------------------------------------------------
    def _on_reasoning(self, data: dict[str, Any]) -> None:
        """A thinking model's reasoning is not shown, only that it is happening (once)."""
        if self.live:
            if self._status is None or self._status.label != "thinking":
                self._wait("thinking")
            self._count(data)
            return
        if not self._thinking and not self._text:
            self._thinking = True
            self.console.print(Text("thinking...", style="dim italic"))

    def _count(self, data: dict[str, Any]) -> None:
        tokens = data.get("tokens")
        if self._status is not None and isinstance(tokens, int):
            self._status.streamed = tokens

    def _on_text(self, data: dict[str, Any]) -> None:
        if self._secrets is None:
            self._secrets = StreamScrubber()
        piece = neutralise(self._secrets.feed(str(data.get("text", ""))))  # scrubbed by the feed
        self._text += piece
        if not self.live:
            self.console.file.write(piece)
            self.console.file.flush()
            return
        if self._status is None or self._status.label != "writing":
            self._wait("writing")
        self._count(data)
        self._start_live()

    def _tail(self, status_rows: int) -> Any:
        """The streaming reply, cut to its last lines when it is taller than the terminal.

        A live display taller than the screen cannot be redrawn in place (the cursor
        cannot go above the top row), so every refresh would leave a copy of the reply
        in the scrollback. The whole reply is printed once, when it ends (``end_block``).
        """
        rendered = reply_markdown(self._text)
        columns, rows = self._screen()
        room = max(rows - LIVE_MARGIN_ROWS - status_rows, 2)
        options = self.console.options.update(width=columns)
        lines = self.console.render_lines(rendered, options, pad=False)
        if len(lines) <= room:
            return rendered
        hidden = len(lines) - room + 1
        note = Text(f"… {hidden} line(s) above; the whole reply follows when it ends", "dim")
        shown: list[Segment] = []
        for number, line in enumerate(lines[hidden:]):
            if number:
                shown.append(Segment.line())
            shown.extend(line)
        return Group(note, Segments(shown))

    def _screen(self) -> tuple[int, int]:
        """The terminal's real size (columns, rows), as it is now.

        rich takes ``COLUMNS``/``LINES`` from the environment over the terminal's own size;
        a stale pair (exported by a shell, or inherited from a parent that set them) would
        make the tail taller than the screen, and then every refresh leaves a copy behind.
        """
        try:
            size = os.get_terminal_size(self.console.file.fileno())
        except (AttributeError, OSError, ValueError):
            return self.console.width, self.console.height
        return size.columns, size.lines

    def end_block(self) -> None:
        """Finish the reply text shown so far (before a tool line, at a turn's end).

        The status line goes; the reply is drawn once more, whole, by ``stop`` over a
        region no taller than the screen, so it lands in the scrollback once.
        """
        with self._lock:
            self._status = None
            rest = self._secrets.flush() if self._secrets is not None else ""
            self._secrets = None
            if rest:
                rest = neutralise(rest)  # the scrubber's own output: scrubbed already
                self._text += rest
                if not self.live:
                    self.console.file.write(rest)
            if self._display is not None:
                self._final = True
                self._display.transient = not self._text
                try:
                    self._display.stop()
                finally:
                    self._display = None
                    self.console.soft_wrap = self._soft_wrap
            elif self._text and not self._text.endswith("\n"):
                self.console.file.write("\n")
                self.console.file.flush()
            self._text = ""
            self._thinking = False

    # ---- tools ----------------------------------------------------------------------------------
    def _on_tool_started(self, data: dict[str, Any]) -> None:
        self.end_block()
        line = Text("  → ", style="cyan")
        line.append(terminal_safe(str(data.get("summary") or data.get("name"))))
        self.console.print(line)
        self._wait(f"running {terminal_safe(str(data.get('name') or 'the tool'))}")

    def _on_tool_finished(self, data: dict[str, Any]) -> None:
        self.end_block()
        self._tool_result(data)
        self._wait("waiting for the model")

    def _tool_result(self, data: dict[str, Any]) -> None:
        result = terminal_safe(str(data.get("result") or ""))
        if data.get("blocked"):
            first = result.splitlines()[0] if result else "blocked"
            self.console.print(Text(f"    {first}", style="yellow"))
            return
        if not data.get("ok"):
            first = result.splitlines()[0] if result else "failed"
            self.console.print(Text(f"    {first}", style="red"))
            return
        diff = terminal_safe(str(data.get("diff") or ""))
        if diff:
            for line in diff.splitlines():
                style = {"+": "green", "-": "red"}.get(line[:1], "dim")
                self.console.print(Text(f"    {line}", style=style))
            return
        if data.get("name") == "bash":
            total = data.get("lines")
            known = total if isinstance(total, int) else None
            for line in bash_preview(result, known, cut="lines" in data and known is None):
                code = exit_code(line)
                style = "dim" if code in (None, 0) else "red"
                self.console.print(Text(f"    {line}", style=style))

    def _on_confirm_asked(self, data: dict[str, Any]) -> None:
        if not data.get("approved"):
            self.console.print(
                Text(f"    refused: {terminal_safe(str(data.get('reason')))}", style="yellow")
            )

    def replay_last_turn(self, history: list[dict[str, Any]]) -> None:
        """Show the last turn of a resumed chat as it looked: prompt, tool lines, reply."""
        start = max(
            (i for i, m in enumerate(history) if m.get("role") == "user" and not m.get("kind")),
            default=None,
        )
        if start is None:
            return
        prompt = str(history[start].get("text") or "").strip()
        self.console.print(Text(f"› {terminal_safe(prompt)}", style="bold"))
        for message in history[start + 1 :]:
            if message.get("role") != "assistant":
                continue
            text = terminal_safe(str(message.get("text") or "")).strip()
            if text:
                self.console.print(reply_markdown(text) if self.live else text)
            for call in message.get("calls") or []:
                line = Text("  → ", style="cyan")
                line.append(terminal_safe(str(call)))
                self.console.print(line)

    # ---- the turn's frame -----------------------------------------------------------------------
    def _on_turn_started(self, data: dict[str, Any]) -> None:
        self._wait("waiting for the model")
        if not self.live:
            first = str(data.get("prompt") or "").strip().splitlines()
            shown = terminal_safe(first[0] if first else "")
            self.console.print(Text(f"> {shown[:200]}", style="bold"))

    def _on_notice(self, data: dict[str, Any]) -> None:
        """One line; a wait in progress (a model call being retried) keeps its status line.

        Printed while the live region runs, rich puts the line above it.
        """
        if self._text:
            self.end_block()  # on its own line, also after a piped reply cut mid-line
        self.console.print(Text(f"note: {terminal_safe(str(data.get('text')))}", style="yellow"))

    def _on_model_retry(self, data: dict[str, Any]) -> None:
        """The engine's retry of a failed model call: one dim line, the status line goes on."""
        text = data.get("text") or (
            f"model call failed ({data.get('reason', 'error')}); retry {data.get('attempt', '')}"
        )
        self.console.print(Text(f"  ↻ {terminal_safe(str(text))}", style="dim"))

    def _on_turn_finished(self, data: dict[str, Any]) -> None:
        self.end_block()
        outcome = data.get("outcome")
        if outcome == "error":
            self.errors.print(
                Text(
                    f"error: {terminal_safe(str(data.get('error')))} "
                    "(the turn stopped; the chat goes on)",
                    style="bold red",
                )
            )
        elif outcome == "cancelled":
            self.console.print(Text("cancelled: the turn was interrupted", style="yellow"))
        files = data.get("files_changed") or []
        tokens = int(data.get("tokens_used") or 0)
        status = status_text(data.get("turn"), tokens, data.get("turn_tokens"))
        if files:
            shown = ", ".join(files[:4]) + (f" +{len(files) - 4}" if len(files) > 4 else "")
            status += f" · changed {shown}"
        self.last_status = status
        self.console.print(Text(f"── {terminal_safe(status)}", style="dim"))
