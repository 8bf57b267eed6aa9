"""A regular expression the model gives ``grep`` cannot hang Tilth.

Python's ``re`` backtracks: ``(a*)*b`` on a line of 28 ``a`` characters took 50 seconds,
one more character doubles it, and nothing could stop it — the run (or ``tilth serve``)
sat in that call.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tilth.tools import ToolBox, search


def test_a_backtracking_pattern_is_stopped_with_advice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "GREP_SECONDS", 1.0)
    (tmp_path / "f.txt").write_text("a" * 40 + "\n")
    started = time.monotonic()
    outcome = ToolBox(tmp_path).dispatch("grep", {"pattern": "(a*)*b"})
    assert time.monotonic() - started < 5
    assert outcome.is_error
    assert "grep stopped after 1s" in outcome.result and "simplify it" in outcome.result


def test_grep_still_finds_lines_in_odd_files(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\nNEEDLE = 'caf\u00e9'\n" + "y" * 500 + "NEEDLE\n")
    (tmp_path / "bin.dat").write_bytes(b"\0NEEDLE\n")
    (tmp_path / "latin.txt").write_bytes(b"NEEDLE \xff\n")
    found = ToolBox(tmp_path).dispatch("grep", {"pattern": "NEEDLE"}).result.splitlines()
    assert found[0] == "a.py:2: NEEDLE = 'caf\u00e9'"
    assert found[1].startswith("a.py:3: yyy") and found[1].endswith(" \u2026")
    assert found[2] == "latin.txt:1: NEEDLE \ufffd"
    assert len(found) == 3


@pytest.mark.parametrize(
    ("pattern", "name"),
    [("*a*a*a*a*a*a*a*a*a*c", "a" * 120), ("**/**/**/**/**/**/**/**/**/zz", "d/" * 30 + "x")],
)
def test_a_glob_pattern_matches_in_linear_time(tmp_path: Path, pattern: str, name: str) -> None:
    """Glob patterns were one regular expression, backtracking on patterns like these."""
    target = tmp_path / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("x\n")
    started = time.monotonic()
    for tool, args in (
        ("glob", {"pattern": pattern}),
        ("grep", {"pattern": "x", "path_glob": pattern}),
    ):
        assert ToolBox(tmp_path).dispatch(tool, args).result == "(no matches)"
    assert time.monotonic() - started < 3
