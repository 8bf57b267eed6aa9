"""The bundled terminal frontend, fed through the real ``IO`` with in-memory streams."""

from __future__ import annotations

import io

import pytest

from tilth.seed.terminal import AnswersExhausted, BadAnswer, TerminalFrontend
from tilth.ui.io import IO


def frontend(
    stdin: str = "", answers: list[str] | None = None
) -> tuple[TerminalFrontend, io.StringIO]:
    out = io.StringIO()
    return TerminalFrontend(IO(io.StringIO(stdin), out, io.StringIO()), answers, "a.txt"), out


def test_menu_answers_from_stdin() -> None:
    front, out = frontend("2\n0\nmy own\ntyped text\n\n")
    assert front.ask_user("Pick", ["x", "y"]) == "y"
    assert front.ask_user("Pick", ["x", "y"]) == "my own"
    assert front.ask_user("Pick", ["x", "y"]) == "typed text"
    assert front.ask_user("Pick", ["x", "y"]) == ""
    shown = out.getvalue()
    assert "? Pick\n  1) x\n  2) y\n  0) Other (type your own answer)\n" in shown
    assert "> 2\n" in shown  # answers read without a terminal are echoed for the log


def test_answers_list_wins_over_stdin_and_running_out_names_the_question() -> None:
    front, _ = frontend("from stdin\n", ["first"])
    assert front.ask_user("One?") == "first"
    with pytest.raises(
        AnswersExhausted, match=r"answers file a\.txt ran out .* question 2: 'Two\?'"
    ):
        front.ask_user("Two?")


def test_end_of_stdin_and_out_of_range_numbers() -> None:
    front, _ = frontend("3\n")
    with pytest.raises(BadAnswer, match="not an option: pick 1-2"):
        front.ask_user("Pick", ["x", "y"])
    with pytest.raises(AnswersExhausted, match="stdin ran out"):
        front.ask_user("Again?")


def test_token_strip_and_summary() -> None:
    front, out = frontend("ok\nok\n")
    front.ask_user("Before any call?")
    assert "[interview" not in out.getvalue()
    front.update_tokens(120, 30)
    front.ask_user("After [brackets]?")
    assert "[interview · prompt 120 · completion 30 · total 150 tokens]" in out.getvalue()
    assert "? After [brackets]?" in out.getvalue()
    front.show_summary("- **T-001:** x", ["q1"], ["b1"])
    text = out.getvalue()
    assert "── seed written ──" in text and "Open questions\n  - q1" in text
    assert "Blockers\n  - b1" in text
