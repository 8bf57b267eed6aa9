"""Names the worker chooses (files it writes) are shown in tables as written.

rich reads a plain string cell as markup: a file named ``[/b].txt`` made ``tilth
checkpoints`` crash, and one named ``[link=https://…]readme[/link].txt`` put a hyperlink
on the user's terminal whose target the user never sees.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from agent.support import GOOD, TASKS, model_env, recipes, seed_session, team_server, tilth
from rich.table import Table

from tilth.demo.script import Recipe, Team
from tilth.ui.io import IO

LINK = "[link=https://evil.example/x]readme[/link].txt"
CLOSER = "notes[/b].txt"  # a file b].txt in a directory notes[
FILE_LINK = "[link=https:evil.example]readme.txt"  # a file name holds no '/'; unclosed works


class Terminal(io.StringIO):
    """A stream rich takes for a terminal."""

    def isatty(self) -> bool:
        return True


def test_table_cells_are_text_not_markup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("FORCE_COLOR", "1")
    screen = Terminal()
    term = IO(stdin=io.StringIO(""), stdout=screen, stderr=screen)
    table = Table("file")
    table.add_row(LINK)
    table.add_row(CLOSER)
    term.table(table)
    shown = screen.getvalue()
    assert "\x1b]8;" not in shown  # no hyperlink
    assert LINK in shown and CLOSER in shown


def test_checkpoints_lists_files_named_like_markup(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    files = {**GOOD["T-001"], FILE_LINK: "x\n", CLOSER: "y\n"}
    with team_server(Team(recipes(T_001=Recipe(files, test_command="true")))) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url))
    assert result.returncode == 0, result.stdout + result.stderr
    listed = tilth("checkpoints", seeded.session.id)
    assert listed.returncode == 0, listed.stderr
    assert CLOSER in listed.stdout and FILE_LINK in listed.stdout
