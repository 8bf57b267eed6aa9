"""A rejection tells the watcher why: its category and the reviewer's concern, on one line."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

from tests.agent.test_pipeline_kit import GOOD_ADD, accept, build, case, plan, write
from tilth.agent.pipeline import run_task
from tilth.agent.progress_sinks import ProgressLog
from tilth.agent.verdict import shorten
from tilth.model import reply, tool_call
from tilth.ui.io import IO
from tilth.ui.progress import TerminalProgress

HOSTILE = (
    "The test only covers\n\tpositive numbers \x1b]0;pwned\x07and "
    + "the negative case is never exercised, " * 8
    + "so add one."
)


def _reject(concern: str) -> dict[str, Any]:
    return reply(
        None,
        tool_call(
            "submit_verdict",
            verdict="reject",
            rejection_category="weak_test",
            concern=concern,
            evidence=["tests/test_t001_add.py:4"],
            next_step="test add(-2, -3)",
        ),
    )


def _worker() -> list[Any]:
    return [plan(), write("calc.py", GOOD_ADD), case(), case("now with negatives")]


def test_the_terminal_shows_the_category_and_the_concern_neutralised_on_one_line(
    tmp_path: Path,
) -> None:
    kit = build(tmp_path, _worker(), [_reject(HOSTILE), accept()])
    buffer = io.StringIO()
    with TerminalProgress(IO(stdout=buffer), live=False) as progress:
        assert run_task(dataclasses.replace(kit.ctx, progress=progress), kit.task()).status == (
            "done"
        )
    shown = buffer.getvalue()
    assert "\x1b" not in shown and "\x07" not in shown
    line = next(ln for ln in shown.splitlines() if "sent the task back" in ln)
    head = "  T-001 code_review sent the task back to implementing: weak_test — "
    assert line.startswith(head + "The test only covers positive numbers \\x1b]0;pwned\\x07and ")
    assert line.endswith("…") and not line.endswith(" …")
    assert len(line) < len(head) + 160


def test_a_library_sink_gets_the_same_line(tmp_path: Path) -> None:
    kit = build(tmp_path, _worker(), [_reject("Misses the empty input."), accept()])
    progress = ProgressLog()
    run_task(dataclasses.replace(kit.ctx, progress=progress), kit.task())
    assert (
        "  T-001 code_review sent the task back to implementing: weak_test — "
        "Misses the empty input."
    ) in progress.notes


def test_shorten_cuts_at_a_word_and_keeps_short_text_whole() -> None:
    assert shorten("  two\nlines  ", 40) == "two lines"
    assert shorten("alpha beta gamma delta", 15) == "alpha beta…"
    assert shorten("x" * 30, 10) == "x" * 9 + "…"
