"""The live progress line and the run summary count tokens alike: the runs' tokens (what
``TILTH_MAX_TOKENS`` counts), the interview's shown apart in the summary only."""

from __future__ import annotations

import re
from pathlib import Path

from tests.agent.support import model_env, team_server
from tests.attempts.support import RIGHT, seed_add
from tests.conftest import run_cli
from tilth.demo.script import Recipe, Team

INTERVIEW = 15


def test_the_progress_line_counts_what_the_summary_counts(repo: Path, sessions_dir: Path) -> None:
    """Found in the user trial: the line started at `T-001 · 15 tokens`, the interview's,
    which the summary counts apart."""
    seeded = seed_add(sessions_dir, repo, interview_tokens=INTERVIEW)
    env = model_env("", TILTH_SANDBOX="off", TILTH_MAX_ITERATIONS_PER_TASK="4")
    team = Team({"T-001": Recipe(files=dict(RIGHT), test_command="true")})
    with team_server(team) as server:
        env["TILTH_BASE_URL"] = server.base_url
        result = run_cli("run", str(repo), env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    shown = [
        int(m.group(1).replace(",", "")) for m in re.finditer(r"· ([\d,]+) tokens", result.stdout)
    ]
    runs = seeded.session.tokens_used - INTERVIEW
    assert runs > 0
    assert shown[0] == 0, output  # before the run's first model call
    assert 0 < max(shown) <= runs, output
    assert f"tokens    {runs:,} by runs" in output, output
    assert f"{runs + INTERVIEW:,} in all with the interview's {INTERVIEW}" in output, output
