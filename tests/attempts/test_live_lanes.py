"""The CLI shows K attempts as K live lines on a terminal: a block redrawn in place (not
scrolled), each line collapsing to its attempt's result; piped, plain prefixed lines."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pexpect

from tests.agent.support import model_env, team_server
from tests.attempts.queue_support import slow
from tests.attempts.support import RIGHT, differing_team, seed_add
from tests.conftest import run_cli

_TOKEN = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r|\n|[^\x1b\r\n]+|\x1b")


def screen(raw: str) -> list[str]:
    """What a terminal shows after ``raw``: lines, carriage returns, erase-line and
    cursor-up applied (other control sequences, colours, dropped)."""
    lines = [""]
    row = 0
    for token in _TOKEN.findall(raw):
        if token == "\n":
            row += 1
            if row == len(lines):
                lines.append("")
        elif token == "\r" or token == "\x1b[2K":
            if token == "\x1b[2K":
                lines[row] = ""
        elif token.startswith("\x1b[") and token.endswith("A"):
            row = max(0, row - int(token[2:-1] or 1))
        elif not token.startswith("\x1b"):
            lines[row] += token
    return lines


def test_a_terminal_redraws_one_line_per_attempt_in_place(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    seeded = seed_add(sessions_dir, repo, interview_tokens=15)
    env = {
        **os.environ,
        **model_env("", TILTH_SANDBOX="off", TILTH_MAX_ITERATIONS_PER_TASK="4"),
        "TERM": "xterm-256color",
        "NO_COLOR": "1",
    }
    with team_server(slow(differing_team(right=2, count=2), 0.2)) as server:
        env["TILTH_BASE_URL"] = server.base_url
        child = pexpect.spawn(
            sys.executable,
            ["-m", "tilth", "run", str(repo), "--attempts", "2"],
            env=env,
            cwd=str(tmp_path),
            dimensions=(60, 220),
            encoding="utf-8",
            timeout=240,
        )
        raw = child.read()
        child.close()
    assert child.exitstatus == 0, raw
    assert (seeded.worktree / "calc.py").read_text() == RIGHT["calc.py"]
    # Redrawn: the block's lines were erased and the cursor moved up over them many times.
    assert raw.count("\x1b[1A\x1b[2K") >= 4, raw
    assert re.search(r"attempt 1/2 \S+ · T-001 · \w+ · ", raw), raw
    # A lane counts its attempt's own tokens (its figure in the summary), from 0: not the
    # 15 of the interview the session's count began with.
    # ...and only its own, never its sibling's: at most its figure in the summary.
    summary = dict(re.findall(r"attempts  T-001 . (\S+): .*?, ([\d,]+) token\(s\)", raw))
    assert len(summary) == 2, raw
    for number in (1, 2):
        assert re.search(rf"attempt {number}/2 \S+ · T-001 · \w+ · 0 tokens", raw), raw
        shown = re.findall(rf"attempt {number}/2 (\S+) · T-001 · [^\x1b\r\n]*?([\d,]+) tokens", raw)
        (attempt,) = {a for a, _ in shown}
        assert max(int(t.replace(",", "")) for _, t in shown) <= int(
            summary[attempt].replace(",", "")
        ), raw
    shown = screen(raw)
    for number in (1, 2):
        # Not scrolled: one line per attempt stays, collapsed to its result (its warnings,
        # prefixed, print above the block).
        on_screen = [line for line in shown if line.startswith(f"attempt {number}/2 ")]
        assert len(on_screen) == 1, "\n".join(shown)
        result = "✓ T-001 passed" if number == 2 else "✗ T-001 failed"
        assert result in on_screen[0], on_screen
        assert on_screen[0].endswith("s")  # its elapsed time


def test_piped_output_keeps_plain_prefixed_lines(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    seed_add(sessions_dir, repo)
    env = model_env("", TILTH_SANDBOX="off", TILTH_MAX_ITERATIONS_PER_TASK="4")
    with team_server(differing_team(right=1, count=2)) as server:
        env["TILTH_BASE_URL"] = server.base_url
        result = run_cli("run", str(repo), "--attempts", "2", env=env, cwd=tmp_path, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "\x1b[" not in result.stdout
    lines = result.stdout.splitlines()
    for number, ending in ((1, "✓ T-001 passed"), (2, "✗ T-001 failed")):
        mine = [line for line in lines if f"[attempt {number}/2 " in line]
        assert any(line.rstrip().endswith("T-001 implementing") for line in mine), mine
        assert mine[-1].strip().endswith(f"ended: {ending}"), mine


def test_an_attempt_waiting_for_a_place_shows_as_queued(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    """With ``--parallel`` below ``--attempts`` the waiting attempt's line said ``starting``
    for minutes, its clock running since its fork."""
    seed_add(sessions_dir, repo)
    env = {
        **os.environ,
        **model_env("", TILTH_SANDBOX="off", TILTH_MAX_ITERATIONS_PER_TASK="4"),
        "TERM": "xterm-256color",
        "NO_COLOR": "1",
    }
    with team_server(slow(differing_team(right=2, count=2), 0.2)) as server:
        env["TILTH_BASE_URL"] = server.base_url
        child = pexpect.spawn(
            sys.executable,
            ["-m", "tilth", "run", str(repo), "--attempts", "2", "--parallel", "1"],
            env=env,
            cwd=str(tmp_path),
            dimensions=(60, 220),
            encoding="utf-8",
            timeout=240,
        )
        raw = child.read()
        child.close()
    assert child.exitstatus == 0, raw
    assert re.search(r"attempt 2/2 \S+ · queued, waiting for a place \(--parallel\)", raw), raw
    # ...then runs in its own line.
    assert re.search(r"attempt 2/2 \S+ · T-001 · \w+ · ", raw), raw
