"""Settings: every variable and default, the .env search order, role routing, clear errors."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tilth.config import find_env_file, load_settings, resolve_endpoint, secret_values
from tilth.errors import ConfigError

RunCli = Callable[..., subprocess.CompletedProcess[str]]

WORKER = {
    "TILTH_BASE_URL": "http://127.0.0.1:9/v1",
    "TILTH_API_KEY": "sk-worker",
    "TILTH_WORKER_MODEL": "worker-model",
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty TILTH_HOME, and a cwd with no .env in it."""
    home = tmp_path / "home"
    home.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return home


def env_of(home: Path, **values: str) -> dict[str, str]:
    return {"TILTH_HOME": str(home), **values}


# ---- defaults and every variable ----------------------------------------------------------
def test_defaults(home: Path) -> None:
    s = load_settings(env_of(home))
    assert s.home == home
    assert s.sessions_dir == home / "sessions"
    assert s.max_iterations_per_task == 32
    assert s.max_evaluator_calls_per_task == 0
    assert s.max_wall_clock_minutes == 120
    assert s.max_tokens == 2_000_000
    assert s.context_files == ("AGENTS.md", "CLAUDE.md")
    assert s.default_tier == "L1"
    assert s.checkpoint_max_age_days == 30
    assert s.checkpoint_max_bytes == 1 << 30
    assert s.model_max_retries == 4
    assert s.model_backoff_seconds == 1.0
    assert s.model_timeout_seconds == 300.0
    assert s.empty_backoff_seconds == 2.0
    assert s.test_timeout_seconds == 180.0
    assert s.lint_command is None
    assert s.warnings == ()


def test_home_defaults_to_dot_tilth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    s = load_settings({})
    assert s.home == tmp_path / ".tilth"
    assert s.sessions_dir == tmp_path / ".tilth" / "sessions"


def test_every_variable_is_read(home: Path, tmp_path: Path) -> None:
    s = load_settings(
        env_of(
            home,
            TILTH_SESSIONS_DIR=str(tmp_path / "elsewhere"),
            TILTH_MAX_ITERATIONS_PER_TASK="7",
            TILTH_MAX_EVALUATOR_CALLS_PER_TASK="3",
            TILTH_MAX_WALL_CLOCK_MINUTES="9",
            TILTH_MAX_TOKENS="12345",
            TILTH_CONTEXT_FILES=" NOTES.md , ,RULES.md ",
            TILTH_DEFAULT_TIER="l2",
            TILTH_CHECKPOINT_MAX_AGE_DAYS="4",
            TILTH_CHECKPOINT_MAX_BYTES="1024",
            TILTH_MODEL_MAX_RETRIES="0",
            TILTH_MODEL_BACKOFF_SECONDS="0.25",
            TILTH_MODEL_TIMEOUT_SECONDS="5",
            TILTH_EMPTY_BACKOFF_SECONDS="0",
            TILTH_TEST_TIMEOUT_SECONDS="7.5",
            TILTH_LINT_COMMAND="ruff check .",
        )
    )
    assert s.sessions_dir == tmp_path / "elsewhere"
    assert s.max_iterations_per_task == 7
    assert s.max_evaluator_calls_per_task == 3
    assert s.max_wall_clock_minutes == 9
    assert s.max_tokens == 12345
    assert s.context_files == ("NOTES.md", "RULES.md")
    assert s.default_tier == "L2"
    assert s.checkpoint_max_age_days == 4
    assert s.checkpoint_max_bytes == 1024
    assert s.model_max_retries == 0
    assert s.model_backoff_seconds == 0.25
    assert s.model_timeout_seconds == 5.0
    assert s.empty_backoff_seconds == 0.0
    assert s.test_timeout_seconds == 7.5
    assert s.lint_command == "ruff check ."


def test_wall_clock_accepts_decimal_minutes(home: Path) -> None:
    assert (
        load_settings(env_of(home, TILTH_MAX_WALL_CLOCK_MINUTES="0.5")).max_wall_clock_minutes
        == 0.5
    )
    assert (
        load_settings(env_of(home, TILTH_MAX_WALL_CLOCK_MINUTES="90")).max_wall_clock_minutes == 90
    )


def test_context_files_all_empty_falls_back_to_default(home: Path) -> None:
    s = load_settings(env_of(home, TILTH_CONTEXT_FILES=" , ,"))
    assert s.context_files == ("AGENTS.md", "CLAUDE.md")


def test_tilde_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    s = load_settings({"TILTH_HOME": "~/th", "TILTH_SESSIONS_DIR": "~/ss"})
    assert s.home == tmp_path / "th"
    assert s.sessions_dir == tmp_path / "ss"


# ---- blank counts as unset ----------------------------------------------------------------
def test_blank_values_count_as_unset(home: Path) -> None:
    s = load_settings(
        env_of(
            home,
            TILTH_SESSIONS_DIR="  ",
            TILTH_MAX_TOKENS="",
            TILTH_MAX_ITERATIONS_PER_TASK=" ",
            TILTH_DEFAULT_TIER="",
            TILTH_CONTEXT_FILES="",
        )
    )
    assert s.sessions_dir == home / "sessions"
    assert s.max_tokens == 2_000_000
    assert s.max_iterations_per_task == 32
    assert s.default_tier == "L1"
    assert s.context_files == ("AGENTS.md", "CLAUDE.md")


def test_blank_required_value_is_missing(home: Path) -> None:
    s = load_settings(env_of(home, **{**WORKER, "TILTH_API_KEY": "   "}))
    with pytest.raises(ConfigError) as info:
        s.endpoint("worker")
    assert "TILTH_API_KEY" in str(info.value)
    assert "TILTH_BASE_URL" not in str(info.value)


def test_blank_env_value_lets_the_env_file_value_through(home: Path) -> None:
    (home / ".env").write_text("TILTH_MAX_TOKENS=77\n")
    assert load_settings(env_of(home, TILTH_MAX_TOKENS="")).max_tokens == 77


def test_blank_env_file_value_is_unset(home: Path) -> None:
    (home / ".env").write_text("TILTH_MAX_TOKENS=\nTILTH_DEFAULT_TIER=   \n")
    s = load_settings(env_of(home))
    assert s.max_tokens == 2_000_000
    assert s.default_tier == "L1"


def test_values_are_stripped(home: Path) -> None:
    s = load_settings(env_of(home, **{**WORKER, "TILTH_WORKER_MODEL": "  m1  "}))
    assert s.endpoint("worker").model == "m1"
    assert load_settings(env_of(home, TILTH_MAX_TOKENS=" 5 ")).max_tokens == 5


# ---- malformed values ---------------------------------------------------------------------
INT_VARIABLES = [
    "TILTH_MAX_ITERATIONS_PER_TASK",
    "TILTH_MAX_EVALUATOR_CALLS_PER_TASK",
    "TILTH_MAX_TOKENS",
    "TILTH_CHECKPOINT_MAX_AGE_DAYS",
    "TILTH_CHECKPOINT_MAX_BYTES",
    "TILTH_MODEL_MAX_RETRIES",
]
DECIMAL_VARIABLES = [
    "TILTH_MAX_WALL_CLOCK_MINUTES",
    "TILTH_MODEL_BACKOFF_SECONDS",
    "TILTH_MODEL_TIMEOUT_SECONDS",
    "TILTH_EMPTY_BACKOFF_SECONDS",
    "TILTH_TEST_TIMEOUT_SECONDS",
]


def assert_one_line_error(home: Path, name: str, raw: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env_of(home, **{name: raw}))
    message = str(info.value)
    assert name in message
    assert "\n" not in message
    assert info.value.exit_code == 2


@pytest.mark.parametrize("name", INT_VARIABLES)
@pytest.mark.parametrize("raw", ["abc", "1.5", "-3", "12k"])
def test_malformed_whole_number_names_the_variable(home: Path, name: str, raw: str) -> None:
    assert_one_line_error(home, name, raw)


@pytest.mark.parametrize("name", DECIMAL_VARIABLES)
@pytest.mark.parametrize("raw", ["abc", "-3", "12k", "nan", "inf"])
def test_malformed_decimal_names_the_variable(home: Path, name: str, raw: str) -> None:
    assert_one_line_error(home, name, raw)


@pytest.mark.parametrize("name", ["TILTH_MODEL_TIMEOUT_SECONDS", "TILTH_TEST_TIMEOUT_SECONDS"])
def test_timeouts_must_be_positive(home: Path, name: str) -> None:
    assert_one_line_error(home, name, "0")


@pytest.mark.parametrize(
    ("name", "raw"),
    [("TILTH_ATTEMPTS", "0"), ("TILTH_CONTEXT_TOKENS", "0"), ("TILTH_CONTEXT_TOKENS", "10")],
)
def test_a_count_that_cannot_work_is_refused(home: Path, name: str, raw: str) -> None:
    """Zero attempts was quietly taken as one; a ten-token window was accepted, and then
    every request would be summarized away before it was sent."""
    assert_one_line_error(home, name, raw)
    assert load_settings(env_of(home, TILTH_CONTEXT_TOKENS="1024")).context_tokens == 1024
    assert load_settings(env_of(home, TILTH_ATTEMPTS="2")).attempts == 2


def test_unknown_tier_is_a_clear_error(home: Path) -> None:
    with pytest.raises(ConfigError, match="TILTH_DEFAULT_TIER"):
        load_settings(env_of(home, TILTH_DEFAULT_TIER="L9"))


def test_malformed_number_in_env_file_names_the_variable(home: Path) -> None:
    (home / ".env").write_text("TILTH_MAX_WALL_CLOCK_MINUTES=soon\n")
    with pytest.raises(ConfigError, match="TILTH_MAX_WALL_CLOCK_MINUTES"):
        load_settings(env_of(home))


def test_a_malformed_value_from_the_env_file_names_that_file(home: Path) -> None:
    """`echo $TILTH_MAX_TOKENS` shows nothing when the bad value sits in a .env file: the
    error says where it came from; a value from the environment gets no such hint."""
    (home / ".env").write_text("TILTH_MAX_TOKENS=2M\nTILTH_SANDBOX=maybe\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(env_of(home))
    assert caught.value.message.endswith(f"(set in {home / '.env'})")
    assert caught.value.hint is None  # one line: the file is named on the error's own line
    with pytest.raises(ConfigError) as caught:
        load_settings(env_of(home, TILTH_SANDBOX="auto"))
    assert caught.value.message == (
        f"TILTH_MAX_TOKENS must be a whole number, got '2M' (set in {home / '.env'})"
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(env_of(home, TILTH_SANDBOX="auto", TILTH_MAX_TOKENS="x"))
    assert caught.value.message == "TILTH_MAX_TOKENS must be a whole number, got 'x'"


@pytest.mark.parametrize("name", ["TILTH_MAX_TOKENS", "TILTH_MAX_ITERATIONS_PER_TASK"])
def test_malformed_number_through_the_cli(cli: RunCli, name: str) -> None:
    result = cli("sessions", env={name: "abc"})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert name in lines[0] and "abc" in lines[0]
    assert lines[0].startswith("error:")
    assert "Traceback" not in result.stderr


def test_bad_env_file_path_through_the_cli(cli: RunCli, tmp_path: Path) -> None:
    result = cli("sessions", env={"TILTH_ENV_FILE": str(tmp_path / "nope.env")})
    assert result.returncode == 2
    assert "TILTH_ENV_FILE" in result.stderr
    assert "Traceback" not in result.stderr


# ---- .env search order --------------------------------------------------------------------
def test_env_file_search_order(home: Path, tmp_path: Path) -> None:
    explicit = tmp_path / "explicit.env"
    explicit.write_text("TILTH_MAX_TOKENS=1\n")
    (home / ".env").write_text("TILTH_MAX_TOKENS=2\n")
    (Path.cwd() / ".env").write_text("TILTH_MAX_TOKENS=3\n")

    assert load_settings(env_of(home, TILTH_ENV_FILE=str(explicit))).max_tokens == 1
    assert find_env_file(env_of(home, TILTH_ENV_FILE=str(explicit))) == explicit
    assert load_settings(env_of(home)).max_tokens == 2
    (home / ".env").unlink()
    assert load_settings(env_of(home)).max_tokens == 3
    (Path.cwd() / ".env").unlink()
    assert find_env_file(env_of(home)) is None
    assert load_settings(env_of(home)).max_tokens == 2_000_000


def test_only_the_first_env_file_is_read(home: Path) -> None:
    (home / ".env").write_text("TILTH_MAX_TOKENS=2\n")
    (Path.cwd() / ".env").write_text("TILTH_MAX_ITERATIONS_PER_TASK=5\n")
    s = load_settings(env_of(home))
    assert s.max_tokens == 2
    assert s.max_iterations_per_task == 32


def test_blank_env_file_variable_is_ignored(home: Path) -> None:
    (home / ".env").write_text("TILTH_MAX_TOKENS=2\n")
    assert load_settings(env_of(home, TILTH_ENV_FILE=" ")).max_tokens == 2


def test_env_file_under_default_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".tilth").mkdir()
    (tmp_path / ".tilth" / ".env").write_text("TILTH_MAX_TOKENS=8\n")
    assert load_settings({}).max_tokens == 8


def test_real_environment_wins_over_env_file(home: Path) -> None:
    (home / ".env").write_text("TILTH_MAX_TOKENS=2\nTILTH_WORKER_MODEL=from-file\n")
    s = load_settings(env_of(home, TILTH_MAX_TOKENS="99"))
    assert s.max_tokens == 99
    assert s.env["TILTH_WORKER_MODEL"] == "from-file"


def test_env_file_can_hold_secrets_and_sessions_dir(home: Path, tmp_path: Path) -> None:
    (home / ".env").write_text(
        "\n".join(f"{k}={v}" for k, v in WORKER.items())
        + f"\nTILTH_SESSIONS_DIR={tmp_path / 'from-file'}\n"
    )
    s = load_settings(env_of(home))
    assert s.endpoint("worker").api_key == "sk-worker"
    assert s.sessions_dir == tmp_path / "from-file"


def test_env_file_is_read_by_the_cli(cli: RunCli, tilth_home: Path, tmp_path: Path) -> None:
    sessions = tmp_path / "via-dotenv"
    (tilth_home / ".env").write_text(f"TILTH_SESSIONS_DIR={sessions}\n")
    result = cli("sessions")
    assert result.returncode == 0, result.stderr
    assert str(sessions) in result.stdout


# ---- routing by role ----------------------------------------------------------------------
def test_worker_endpoint(home: Path) -> None:
    ep = load_settings(env_of(home, **WORKER)).endpoint("worker")
    assert (ep.role, ep.base_url, ep.api_key, ep.model) == (
        "worker",
        WORKER["TILTH_BASE_URL"],
        "sk-worker",
        "worker-model",
    )
    assert "sk-worker" not in repr(ep)


@pytest.mark.parametrize("role,prefix", [("evaluator", "TILTH_EVALUATOR"), ("prep", "TILTH_PREP")])
def test_roles_fall_back_to_worker_settings(home: Path, role: str, prefix: str) -> None:
    s = load_settings(env_of(home, **WORKER))
    ep = s.endpoint(role)  # type: ignore[arg-type]
    assert (ep.role, ep.base_url, ep.api_key, ep.model) == (
        role,
        WORKER["TILTH_BASE_URL"],
        "sk-worker",
        "worker-model",
    )


@pytest.mark.parametrize("role,prefix", [("evaluator", "TILTH_EVALUATOR"), ("prep", "TILTH_PREP")])
def test_roles_override_each_setting_alone(home: Path, role: str, prefix: str) -> None:
    only_model = load_settings(env_of(home, **WORKER, **{f"{prefix}_MODEL": "m2"}))
    ep = only_model.endpoint(role)  # type: ignore[arg-type]
    assert (ep.base_url, ep.api_key, ep.model) == (WORKER["TILTH_BASE_URL"], "sk-worker", "m2")
    assert only_model.endpoint("worker").model == "worker-model"

    everything = load_settings(
        env_of(
            home,
            **WORKER,
            **{
                f"{prefix}_BASE_URL": "http://127.0.0.1:10/v1",
                f"{prefix}_API_KEY": "sk-other",
            },
        )
    )
    ep = everything.endpoint(role)  # type: ignore[arg-type]
    assert (ep.base_url, ep.api_key, ep.model) == (
        "http://127.0.0.1:10/v1",
        "sk-other",
        "worker-model",
    )
    assert everything.endpoint("worker").api_key == "sk-worker"


def test_a_role_can_be_complete_without_the_worker_model(home: Path) -> None:
    env = env_of(
        home,
        TILTH_BASE_URL="http://127.0.0.1:9/v1",
        TILTH_API_KEY="k",
        TILTH_EVALUATOR_MODEL="judge",
    )
    s = load_settings(env)
    assert s.endpoint("evaluator").model == "judge"
    with pytest.raises(ConfigError, match="TILTH_WORKER_MODEL"):
        s.endpoint("worker")


@pytest.mark.parametrize("role", ["worker", "evaluator", "prep"])
def test_missing_required_names_every_variable_on_one_line(home: Path, role: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env_of(home)).endpoint(role)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message
    assert role in message
    for name in ("TILTH_BASE_URL", "TILTH_API_KEY", "TILTH_WORKER_MODEL"):
        assert name in message
    assert info.value.exit_code == 2


def test_missing_required_names_only_what_is_missing(home: Path) -> None:
    env = {k: v for k, v in WORKER.items() if k != "TILTH_WORKER_MODEL"}
    with pytest.raises(ConfigError) as info:
        resolve_endpoint(env, "worker")
    assert "TILTH_WORKER_MODEL" in str(info.value)
    assert "TILTH_API_KEY" not in str(info.value)


def test_settings_load_without_model_variables(home: Path) -> None:
    """Verbs that make no model calls must not demand model settings."""
    load_settings(env_of(home))


def test_openrouter_detection(home: Path) -> None:
    env = {**WORKER, "TILTH_BASE_URL": "https://openrouter.ai/api/v1"}
    assert resolve_endpoint(env, "worker").is_openrouter
    assert not resolve_endpoint(WORKER, "worker").is_openrouter


def test_secret_values_lists_every_api_key(home: Path) -> None:
    s = load_settings(env_of(home, **WORKER, TILTH_PREP_API_KEY="sk-prep"))
    assert sorted(secret_values(s.env)) == ["sk-prep", "sk-worker"]


# ---- damaged .env files -------------------------------------------------------------------
def test_unparsable_env_line_is_a_warning_and_the_rest_is_read(home: Path) -> None:
    (home / ".env").write_text("TILTH_MAX_TOKENS=5\nthis is not a setting\nTILTH_DEFAULT_TIER=L2\n")
    s = load_settings(env_of(home))
    assert s.max_tokens == 5 and s.default_tier == "L2"
    assert s.warnings == (f"{home / '.env'}: cannot parse line 2; it is ignored",)
    assert load_settings(env_of(home, TILTH_MAX_TOKENS="9")).warnings == s.warnings


def test_unparsable_env_line_through_the_cli(cli: RunCli, tilth_home: Path) -> None:
    (tilth_home / ".env").write_text("oops oops\n")
    result = cli("sessions")
    assert result.returncode == 0
    assert result.stderr.strip().splitlines() == [
        f"warning: {tilth_home / '.env'}: cannot parse line 1; it is ignored"
    ]


def test_env_file_that_is_not_text(cli: RunCli, tilth_home: Path) -> None:
    (tilth_home / ".env").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_settings({"TILTH_HOME": str(tilth_home)})
    result = cli("sessions")
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {tilth_home / '.env'} is not UTF-8 text")
    assert "Traceback" not in result.stderr


def test_relative_paths_become_absolute(home: Path) -> None:
    s = load_settings({"TILTH_HOME": "rel-home", "TILTH_SESSIONS_DIR": "rel-sessions"})
    assert s.home == Path.cwd() / "rel-home"
    assert s.sessions_dir == Path.cwd() / "rel-sessions"


def test_the_repeated_failures_guard_is_off_at_zero_and_needs_a_repeat() -> None:
    assert load_settings({}).max_repeated_failures == 3
    assert load_settings({"TILTH_MAX_REPEATED_FAILURES": "0"}).max_repeated_failures == 0
    assert load_settings({"TILTH_MAX_REPEATED_FAILURES": "5"}).max_repeated_failures == 5
    with pytest.raises(ConfigError, match=r"must be 0 \(off\) or at least 2"):
        load_settings({"TILTH_MAX_REPEATED_FAILURES": "1"})
