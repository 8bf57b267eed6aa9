"""Signs of life in a terminal chat: the status line under a turn, and the tool previews.

While a turn waits (for the model's first words, for a tool to finish) the last row shows
a spinner, what it waits for, how long so far and the tokens used (``⠹ waiting for the
model · 4s · 1,234 tokens``). It is drawn by the chat view's live display and removed
when the wait ends, so it never reaches the scrollback.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from rich.text import Text

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
FRAMES_PER_SECOND = 10
TOOL_OUTPUT_LINES = 4
"""Lines of a ``bash`` result a tool line shows: the last ones, as a terminal would."""

_EXIT = re.compile(r"^\[exit (-?\d+)\]$")


class StatusLine:
    """What a turn waits for, since when; rendered as one dim line with a spinner."""

    def __init__(self, label: str, tokens: Callable[[], int]) -> None:
        self.label = label
        self.since = time.monotonic()
        self.tokens = tokens
        self.streamed = 0
        """Tokens of the reply being streamed (not yet in the session's count)."""

    def text(self, now: float | None = None) -> str:
        elapsed = (now if now is not None else time.monotonic()) - self.since
        frame = SPINNER[int(elapsed * FRAMES_PER_SECOND) % len(SPINNER)]
        seconds = (
            f"{elapsed:.0f}s" if elapsed < 60 else f"{int(elapsed // 60)}m{elapsed % 60:02.0f}s"
        )
        return f"{frame} {self.label} · {seconds} · {self.tokens() + self.streamed:,} tokens"

    def __rich__(self) -> Text:
        return Text(self.text(), style="dim")


def bash_preview(result: str, total_lines: int | None = None, *, cut: bool = False) -> list[str]:
    """The last lines of a ``bash`` result, a count of those above, then ``[exit N]``.

    ``result`` may be a preview (its middle cut out, ``tilth.chat.toolview.preview``);
    ``total_lines`` is then the whole output's line count, so the count is true. ``cut``:
    the tool itself cut the output, so how many lines there were is not known.
    """
    lines = result.rstrip("\n").splitlines()
    status = lines.pop() if lines and _EXIT.match(lines[-1].strip()) else None
    total = total_lines - (1 if status else 0) if total_lines else len(lines)
    shown = lines[-TOOL_OUTPUT_LINES:]
    above = max(total - len(shown), 0)
    out = [f"... {above} more line(s)"] if above and not cut else []
    if cut:
        out = ["... earlier lines not shown (the output was cut to its head and tail)"]
    out += shown
    if status is not None:
        out.append(status.strip())
    return out


def exit_code(line: str) -> int | None:
    """N of an ``[exit N]`` line, else None."""
    found = _EXIT.match(line.strip())
    return int(found.group(1)) if found else None
