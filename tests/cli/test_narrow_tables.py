"""``sessions`` and ``checkpoints`` on an 80-column terminal: nothing wider, no word cut."""

from __future__ import annotations

import re
from pathlib import Path

from agent.support import TASKS, model_env, recipes, seed_session, team_server, tilth
from seed.support import Terminal

from tilth.demo.script import Team


def on_terminal(args: list[str], env: dict[str, str]) -> list[str]:
    term = Terminal(args, {**env, "COLUMNS": "80", "LINES": "200"})
    code, text = term.finish()
    assert code == 0, text
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def test_tables_fit_80_columns_without_breaking_words(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    with team_server(Team(recipes())) as server:
        env = model_env(server.base_url)
        assert tilth("run", str(repo), env=env).returncode == 0
    env = {"TILTH_SESSIONS_DIR": str(sessions_dir)}
    listing = on_terminal(["sessions"], env)
    timeline = on_terminal(["checkpoints", seeded.session.id], env)
    for line in listing + timeline:
        assert len(line) <= 80, line
    (row,) = [line for line in listing if line.startswith(seeded.session.id)]
    assert row.endswith(str(repo)[-10:]), "a long source keeps its end"
    words = {w for line in timeline for w in re.findall(r"[a-z_]{6,}:", line)}
    assert words <= {"planning:", "implementing:", "code_review:", "verifying:"}, words
    assert "implementing:" in words, "whole words, not `implementin` + `g:`"
    assert any(line.startswith("cp-0001 ") for line in timeline)
