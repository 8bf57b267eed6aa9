"""Every bad input gets a clear one-line error and the right exit code, never a traceback."""

from __future__ import annotations

import importlib.util
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

RunCli = Callable[..., subprocess.CompletedProcess[str]]


def assert_clean_failure(result: subprocess.CompletedProcess[str], code: int) -> list[str]:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines, "a failure must say what went wrong"
    return lines


@pytest.mark.parametrize(
    "args,needle",
    [
        (["no-such-verb"], "No such command"),
        (["--no-such-option"], "No such option"),
        (["sessions", "--bogus"], "No such option"),
        (["sessions", "extra-arg"], "unexpected extra argument"),
        (["reset", "a", "b"], "unexpected extra argument"),
    ],
)
def test_usage_errors_exit_2(cli: RunCli, args: list[str], needle: str) -> None:
    lines = assert_clean_failure(cli(*args), 2)
    assert any(needle.lower() in line.lower() for line in lines)


@pytest.mark.parametrize(
    "env,name",
    [
        ({"TILTH_MAX_TOKENS": "abc"}, "TILTH_MAX_TOKENS"),
        ({"TILTH_MAX_WALL_CLOCK_MINUTES": "2h"}, "TILTH_MAX_WALL_CLOCK_MINUTES"),
        ({"TILTH_MAX_EVALUATOR_CALLS_PER_TASK": "-1"}, "TILTH_MAX_EVALUATOR_CALLS_PER_TASK"),
        ({"TILTH_MAX_ITERATIONS_PER_TASK": "3.5"}, "TILTH_MAX_ITERATIONS_PER_TASK"),
        ({"TILTH_DEFAULT_TIER": "L7"}, "TILTH_DEFAULT_TIER"),
    ],
)
@pytest.mark.parametrize("verb", [["sessions"], ["reset", "-y"]])
def test_bad_settings_are_one_line(
    cli: RunCli, env: dict[str, str], name: str, verb: list[str]
) -> None:
    lines = assert_clean_failure(cli(*verb, env=env), 2)
    assert len(lines) == 1
    assert lines[0].startswith("error: ") and name in lines[0]


def test_bad_env_file_value_is_one_line(cli: RunCli, tilth_home: Path) -> None:
    (tilth_home / ".env").write_text("TILTH_MAX_TOKENS=lots\n")
    lines = assert_clean_failure(cli("sessions"), 2)
    assert len(lines) == 1 and "TILTH_MAX_TOKENS" in lines[0] and "lots" in lines[0]


def test_sessions_dir_that_is_a_file(cli: RunCli, tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    result = cli("sessions", env={"TILTH_SESSIONS_DIR": str(not_a_dir)})
    assert result.returncode == 0
    assert "no sessions" in result.stdout
    lines = assert_clean_failure(cli("reset", "-y", env={"TILTH_SESSIONS_DIR": str(not_a_dir)}), 2)
    assert "no sessions found" in lines[0]


def test_unknown_session_names_it_and_hints_at_the_listing(cli: RunCli) -> None:
    lines = assert_clean_failure(cli("reset", "20200101-000000-abcdef", "-y"), 2)
    assert lines[0].startswith("error: no session 20200101-000000-abcdef under ")
    assert any(line.startswith("hint: ") and "tilth sessions" in line for line in lines)


@pytest.mark.skipif(
    importlib.util.find_spec("tilth.cli.prep") is None, reason="prep-feature not built yet"
)
def test_missing_model_settings_name_every_variable_before_anything_happens(
    cli: RunCli, repo: Path, sessions_dir: Path
) -> None:
    lines = assert_clean_failure(cli("prep-feature", str(repo), "--brief", "x"), 2)
    assert lines[0].startswith("error: missing required setting(s) for prep model calls: ")
    for name in ("TILTH_BASE_URL", "TILTH_API_KEY", "TILTH_WORKER_MODEL"):
        assert name in lines[0]
    assert not sessions_dir.exists() or not any(sessions_dir.iterdir())
