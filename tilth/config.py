"""Typed settings read from the environment and an optional ``.env`` file.

Search order for ``.env``: ``$TILTH_ENV_FILE``, ``$TILTH_HOME/.env``, ``./.env``;
the first that exists is read, and real environment variables always win over it.
A ``./.env`` inside a directory a model can write (the sessions directory, which holds
every worktree, or a chat's directory) is never read: a warning says where to put it.
Blank values count as unset. Model calls are routed by role (worker, evaluator,
prep), never by model name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tilth.errors import ConfigError
from tilth.git.env import sign_commits
from tilth.secret_filter import remember as remember_secrets

Role = Literal["worker", "evaluator", "prep"]
ROLES: tuple[Role, ...] = ("worker", "evaluator", "prep")
TIERS = ("L1", "L2")
SANDBOX_MODES = ("auto", "bwrap", "landlock", "required", "off")


@dataclass(frozen=True)
class Endpoint:
    """Where one role's model calls go."""

    role: Role
    base_url: str
    api_key: str = field(repr=False)
    model: str

    @property
    def is_openrouter(self) -> bool:
        """True when the routed base URL is OpenRouter (reasoning opt-in applies)."""
        return "openrouter.ai" in self.base_url


@dataclass(frozen=True)
class Settings:
    """Everything Tilth reads from its environment."""

    home: Path
    """Root of all per-user state (``TILTH_HOME``, default ``~/.tilth``)."""
    sessions_dir: Path
    """Where sessions live (``TILTH_SESSIONS_DIR``, default ``$TILTH_HOME/sessions``)."""
    max_iterations_per_task: int = 32
    """Worker turns per task attempt (``TILTH_MAX_ITERATIONS_PER_TASK``)."""
    max_evaluator_calls_per_task: int = 0
    """Rejections before a task fails with ``evaluator_cap``; 0 turns the cap off."""
    max_verify_failures_per_task: int = 3
    """Failed verifying stages before a task fails with ``verify_cap``; 0 turns the cap off."""
    max_repeated_failures: int = 3
    """Model replies in one turn that repeat the same failing tool call (same tool, arguments
    and error) before the turn stops (``TILTH_MAX_REPEATED_FAILURES``); 0 = off, else ≥ 2."""
    max_wall_clock_minutes: float = 120
    """Wall-clock budget per run/resume invocation and per prep interview (the time waiting
    for the user's answers not counted); decimals allowed (0.5 = 30 s), 0 = off."""
    max_tokens: int = 2_000_000
    """Cumulative prompt+completion tokens for the session."""
    context_files: tuple[str, ...] = ("AGENTS.md", "CLAUDE.md")
    """Project context files injected into prompts (``TILTH_CONTEXT_FILES``)."""
    default_tier: str = "L1"
    """Stage tier for tasks that name none (``TILTH_DEFAULT_TIER``)."""
    checkpoint_max_age_days: int = 30
    """Snapshot retention by age (``TILTH_CHECKPOINT_MAX_AGE_DAYS``)."""
    checkpoint_max_bytes: int = 1 << 30
    """Snapshot retention by total size (``TILTH_CHECKPOINT_MAX_BYTES``)."""
    model_max_retries: int = 4
    """Retries after a 429, 5xx, timeout or lost connection (``TILTH_MODEL_MAX_RETRIES``)."""
    model_backoff_seconds: float = 1.0
    """First retry delay, doubled each retry (``TILTH_MODEL_BACKOFF_SECONDS``)."""
    model_timeout_seconds: float = 300.0
    """Longest wait for a reply to start, or between two pieces of a streamed reply, or for
    content while a stream sends only keep-alives (``TILTH_MODEL_TIMEOUT_SECONDS``); a stall
    past it is retried."""
    max_reply_tokens: int = 8192
    """``max_tokens`` sent with every model request (``TILTH_MAX_REPLY_TOKENS``); a reply cut
    off at it is reported to the user and to the model."""
    context_tokens: int | None = None
    """A model's context window when its endpoint does not say (``TILTH_CONTEXT_TOKENS``);
    None: ask the endpoint, else 32768. Threads are summarized before a request passes ~90%."""
    empty_backoff_seconds: float = 2.0
    """Wait after an empty model response, times the streak (``TILTH_EMPTY_BACKOFF_SECONDS``)."""
    test_timeout_seconds: float = 180.0
    """Time limit for one seed-test or lint run (``TILTH_TEST_TIMEOUT_SECONDS``)."""
    lint_command: str | None = None
    """Shell command the verifying stage runs as a linter (``TILTH_LINT_COMMAND``); None = none."""
    test_command: str | None = None
    """Shell line that runs the seed tests, ``{files}`` = the files (``TILTH_TEST_COMMAND``)."""
    setup_command: str | None = None
    """Shell line run once in every new worktree (``TILTH_SETUP_COMMAND``); None = none."""
    setup_timeout_seconds: float = 900.0
    """Time limit for ``TILTH_SETUP_COMMAND`` (``TILTH_SETUP_TIMEOUT_SECONDS``)."""
    sandbox: str = "auto"
    """The worker's ``bash`` sandbox (``TILTH_SANDBOX``): ``auto`` uses bubblewrap when it works,
    else Landlock, and warns loudly when neither does; ``required`` refuses to run without
    one; ``bwrap`` and ``landlock`` name the one backend to use; ``off`` uses none."""
    sandbox_network: bool = True
    """Whether sandboxed ``bash`` keeps the network (``TILTH_SANDBOX_NETWORK=on|off``)."""
    attempts: int = 1
    """Attempts per task, each a fork of the task's start (``TILTH_ATTEMPTS``, SPEC §11)."""
    parallel: int = 0
    """How many attempts run at once on this machine (``TILTH_PARALLEL``; 0 = all of them)."""
    database_url: str | None = None
    """The durable queue's database (``TILTH_DATABASE_URL``); None = SQLite under the home."""
    queue_keep_days: int = 7
    """How long the queue's database keeps a finished workflow (``TILTH_QUEUE_KEEP_DAYS``); it
    is deleted after that, or once 1,000 newer finished ones are kept, unless a resume needs it."""
    sign_commits: bool = False
    """Whether Tilth's own commits follow the user's ``commit.gpgsign`` (``TILTH_SIGN_COMMITS=on``);
    off, they are never signed."""
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    """The merged raw values, for endpoint resolution."""
    warnings: tuple[str, ...] = ()
    """Problems that did not stop loading (unparsable ``.env`` lines), for the CLI to show."""

    def endpoint(self, role: Role) -> Endpoint:
        """The endpoint for ``role``, falling back to the worker's; raises if incomplete."""
        return resolve_endpoint(self.env, role)


_INT_DEFAULTS = {
    "TILTH_MAX_ITERATIONS_PER_TASK": 32,
    "TILTH_MAX_EVALUATOR_CALLS_PER_TASK": 0,
    "TILTH_MAX_VERIFY_FAILURES_PER_TASK": 3,
    "TILTH_MAX_REPEATED_FAILURES": 3,
    "TILTH_MAX_WALL_CLOCK_MINUTES": 120,
    "TILTH_MAX_TOKENS": 2_000_000,
    "TILTH_CHECKPOINT_MAX_AGE_DAYS": 30,
    "TILTH_CHECKPOINT_MAX_BYTES": 1 << 30,
    "TILTH_MODEL_MAX_RETRIES": 4,
    "TILTH_ATTEMPTS": 1,
    "TILTH_PARALLEL": 0,
}

_FLOAT_DEFAULTS = {
    "TILTH_MODEL_BACKOFF_SECONDS": 1.0,
    "TILTH_MODEL_TIMEOUT_SECONDS": 300.0,
    "TILTH_EMPTY_BACKOFF_SECONDS": 2.0,
    "TILTH_TEST_TIMEOUT_SECONDS": 180.0,
    "TILTH_SETUP_TIMEOUT_SECONDS": 900.0,
}


def _blank_to_none(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return value or None


def find_env_file(
    environ: Mapping[str, str],
    model_writable: Sequence[Path] = (),
    warnings: list[str] | None = None,
) -> Path | None:
    """The ``.env`` file to read, by the documented search order, or None.

    A ``./.env`` that a model could have written (it lies in the sessions directory, in a
    recorded chat's directory or in one of ``model_writable``) is passed over, with a
    warning in ``warnings``.
    """
    candidates: list[Path] = []
    explicit = _blank_to_none(environ.get("TILTH_ENV_FILE"))
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"TILTH_ENV_FILE points at {path}, which is not a file")
        return path
    home = _blank_to_none(environ.get("TILTH_HOME"))
    candidates.append(Path(home).expanduser() / ".env" if home else Path.home() / ".tilth" / ".env")
    for path in candidates:
        if path.is_file():
            return path
    local = Path.cwd() / ".env"
    if not local.is_file():
        return None
    why = _model_could_write(local, environ, model_writable)
    if why is None:
        return local
    if warnings is not None:
        home_env = candidates[0]
        warnings.append(
            f"{local} is not read: it lies in {why}, which a model can write; "
            f"put your settings in {home_env} (or name a file with TILTH_ENV_FILE)"
        )
    return None


def _model_could_write(
    env_file: Path, environ: Mapping[str, str], model_writable: Sequence[Path]
) -> str | None:
    """Where ``env_file`` lies when a model could have written it there, else None."""
    here = Path(os.path.realpath(env_file.parent))
    for directory in model_writable:
        if here.is_relative_to(os.path.realpath(directory)):
            return f"the directory the chat works in ({directory})"
    home = _blank_to_none(environ.get("TILTH_HOME"))
    home_dir = Path(home).expanduser() if home else Path.home() / ".tilth"
    raw_sessions = _blank_to_none(environ.get("TILTH_SESSIONS_DIR"))
    sessions = Path(raw_sessions).expanduser() if raw_sessions else home_dir / "sessions"
    if here.is_relative_to(os.path.realpath(sessions)):
        return f"the sessions directory {sessions} (a session's worktree)"
    for directory in _chat_directories(sessions):
        if here.is_relative_to(os.path.realpath(directory)):
            return f"the directory a chat works in ({directory})"
    return None


def _chat_directories(sessions: Path) -> list[Path]:
    """The directories recorded chat sessions work in (their ``checkpoint.json``)."""
    import json

    found = []
    try:
        entries = list(sessions.iterdir())
    except OSError:
        return []
    for entry in entries:
        try:
            record = json.loads((entry / "checkpoint.json").read_text("utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("kind") == "chat":
            workspace = record.get("workspace")
            if isinstance(workspace, str) and workspace:
                found.append(Path(workspace))
    return found


def read_env_file(path: Path) -> tuple[dict[str, str], list[str]]:
    """The non-blank values of a ``.env`` file, and a warning per line it could not parse.

    Unparsable lines are warnings, not errors: ``./.env`` may belong to another tool.
    """
    import logging

    from dotenv import dotenv_values

    class _Collect(logging.Handler):
        def __init__(self) -> None:
            super().__init__()
            self.lines: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            found = re.search(r"line (\d+)", record.getMessage())
            self.lines.append(found.group(1) if found else "?")

    # python-dotenv logs unparsable lines straight to stderr; turn them into our warnings.
    logger = logging.getLogger("dotenv.main")
    collect = _Collect()
    logger.addHandler(collect)
    propagate, logger.propagate = logger.propagate, False
    try:
        raw = dotenv_values(path)
    except UnicodeDecodeError:
        raise ConfigError(
            f"{path} is not UTF-8 text", hint="fix or remove that .env file"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        logger.removeHandler(collect)
        logger.propagate = propagate
    values = {k: v.strip() for k, v in raw.items() if v is not None and v.strip()}
    remember_secrets(values)  # a key read here is filtered out of everything Tilth writes
    warnings = [f"{path}: cannot parse line {n}; it is ignored" for n in collect.lines]
    return values, warnings


def merged_environment(
    environ: Mapping[str, str] | None = None,
    warnings: list[str] | None = None,
    model_writable: Sequence[Path] = (),
) -> dict[str, str]:
    """Process environment over the ``.env`` file's values (blank entries count as unset).

    Lines of the ``.env`` file that cannot be parsed are described in ``warnings``.
    """
    environ = os.environ if environ is None else environ
    merged: dict[str, str] = {}
    env_file = find_env_file(environ, model_writable, warnings)
    if env_file is not None:
        values, problems = read_env_file(env_file)
        merged.update(values)
        if warnings is not None:
            warnings.extend(problems)
    for key, value in environ.items():
        # Blank counts as unset, so a blank variable does not mask the .env value.
        if value.strip():
            merged[key] = value.strip()
    return merged


def _int(env: Mapping[str, str], name: str) -> int:
    return int_setting(env, name, _INT_DEFAULTS[name])


def int_setting(env: Mapping[str, str], name: str, default: int) -> int:
    """A whole, non-negative number from ``env[name]`` (blank = ``default``)."""
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {raw!r}") from None
    if value < 0:
        raise ConfigError(f"{name} must not be negative, got {value}")
    return value


def _repeat_limit(env: Mapping[str, str]) -> int:
    """``TILTH_MAX_REPEATED_FAILURES``: 0 (off) or at least 2 (one failure is no repeat)."""
    value = _int(env, "TILTH_MAX_REPEATED_FAILURES")
    if value == 1:
        raise ConfigError("TILTH_MAX_REPEATED_FAILURES must be 0 (off) or at least 2, got 1")
    return value


def _positive_int(env: Mapping[str, str], name: str, default: int) -> int:
    """A whole number above zero from ``env[name]`` (blank = ``default``)."""
    value = int_setting(env, name, default)
    if value == 0 and (env.get(name) or "").strip():
        raise ConfigError(f"{name} must be a whole number above zero, got 0")
    return value


MIN_CONTEXT_TOKENS = 1024
"""The smallest window ``TILTH_CONTEXT_TOKENS`` may name: below it the system prompt and the
tools alone fill the window, and every turn would be summarized away before it began."""


def _context_tokens(env: Mapping[str, str]) -> int | None:
    value = _positive_int(env, "TILTH_CONTEXT_TOKENS", 0)
    if value and value < MIN_CONTEXT_TOKENS:
        raise ConfigError(
            f"TILTH_CONTEXT_TOKENS must be at least {MIN_CONTEXT_TOKENS:,} tokens, got {value} "
            "(the system prompt and the tools alone would fill a smaller window)"
        )
    return value or None


def _float(env: Mapping[str, str], name: str, *, positive: bool = False) -> float:
    raw = env.get(name)
    if raw is None:
        return _FLOAT_DEFAULTS[name]
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds, got {raw!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ConfigError(f"{name} must be a finite number, got {raw!r}")
    if value < 0 or (positive and value == 0):
        raise ConfigError(f"{name} must be {'positive' if positive else 'not negative'}, got {raw}")
    return value


def _minutes(env: Mapping[str, str], name: str) -> float:
    """A whole or decimal number of minutes; whole values stay ``int`` so messages read "120"."""
    raw = env.get(name)
    if raw is None:
        return _INT_DEFAULTS[name]
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number of minutes, got {raw!r}") from None
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        raise ConfigError(f"{name} must be a finite, non-negative number, got {raw!r}")
    return int(value) if value.is_integer() else value


def _choice(env: Mapping[str, str], name: str, allowed: tuple[str, ...], default: str) -> str:
    """One of ``allowed`` from ``env[name]`` (case-insensitive; blank = ``default``)."""
    value = (env.get(name) or default).strip().lower()
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def load_settings(
    environ: Mapping[str, str] | None = None, *, model_writable: Sequence[Path] = ()
) -> Settings:
    """Read every setting; raises ``ConfigError`` naming a malformed variable.

    ``model_writable``: directories a model works in this time (a chat's), whose
    ``./.env`` is never read.
    """
    environ = os.environ if environ is None else environ
    warnings: list[str] = []
    env = merged_environment(environ, warnings, model_writable)
    try:
        settings = _settings(env, warnings)
    except ConfigError as exc:
        raise _with_origin(exc, environ, model_writable) from None
    sign_commits(settings.sign_commits)
    return settings


def _with_origin(
    exc: ConfigError, environ: Mapping[str, str], model_writable: Sequence[Path] = ()
) -> ConfigError:
    """``exc`` naming the ``.env`` file when the bad value came from there.

    Said on the error's own line: a malformed setting is a one-line error (SPEC §3).
    """
    name = exc.message.split(" ", 1)[0]
    if exc.hint or not name.startswith("TILTH_") or (environ.get(name) or "").strip():
        return exc
    env_file = find_env_file(environ, model_writable)
    if env_file is None:
        return exc
    return ConfigError(f"{exc.message} (set in {env_file})")


def _settings(env: dict[str, str], warnings: list[str]) -> Settings:
    # Absolute, because these paths are handed to git running in other directories.
    home = Path(env.get("TILTH_HOME", str(Path.home() / ".tilth"))).expanduser().absolute()
    sessions = Path(env.get("TILTH_SESSIONS_DIR", str(home / "sessions"))).expanduser().absolute()
    files = tuple(f.strip() for f in env.get("TILTH_CONTEXT_FILES", "").split(",") if f.strip())
    sandbox = _choice(env, "TILTH_SANDBOX", SANDBOX_MODES, "auto")
    network = _choice(env, "TILTH_SANDBOX_NETWORK", ("on", "off"), "on") == "on"
    tier = env.get("TILTH_DEFAULT_TIER", "L1").upper()
    if tier not in TIERS:
        raise ConfigError(f"TILTH_DEFAULT_TIER must be one of {', '.join(TIERS)}, got {tier!r}")
    return Settings(
        home=home,
        sessions_dir=sessions,
        max_iterations_per_task=_int(env, "TILTH_MAX_ITERATIONS_PER_TASK"),
        max_evaluator_calls_per_task=_int(env, "TILTH_MAX_EVALUATOR_CALLS_PER_TASK"),
        max_verify_failures_per_task=_int(env, "TILTH_MAX_VERIFY_FAILURES_PER_TASK"),
        max_repeated_failures=_repeat_limit(env),
        max_wall_clock_minutes=_minutes(env, "TILTH_MAX_WALL_CLOCK_MINUTES"),
        max_tokens=_int(env, "TILTH_MAX_TOKENS"),
        context_files=files or ("AGENTS.md", "CLAUDE.md"),
        default_tier=tier,
        checkpoint_max_age_days=_int(env, "TILTH_CHECKPOINT_MAX_AGE_DAYS"),
        checkpoint_max_bytes=_int(env, "TILTH_CHECKPOINT_MAX_BYTES"),
        model_max_retries=_int(env, "TILTH_MODEL_MAX_RETRIES"),
        model_backoff_seconds=_float(env, "TILTH_MODEL_BACKOFF_SECONDS"),
        model_timeout_seconds=_float(env, "TILTH_MODEL_TIMEOUT_SECONDS", positive=True),
        max_reply_tokens=_positive_int(env, "TILTH_MAX_REPLY_TOKENS", 8192),
        context_tokens=_context_tokens(env),
        empty_backoff_seconds=_float(env, "TILTH_EMPTY_BACKOFF_SECONDS"),
        test_timeout_seconds=_float(env, "TILTH_TEST_TIMEOUT_SECONDS", positive=True),
        lint_command=env.get("TILTH_LINT_COMMAND") or None,
        test_command=env.get("TILTH_TEST_COMMAND") or None,
        setup_command=env.get("TILTH_SETUP_COMMAND") or None,
        setup_timeout_seconds=_float(env, "TILTH_SETUP_TIMEOUT_SECONDS", positive=True),
        sandbox=sandbox,
        sandbox_network=network,
        attempts=_positive_int(env, "TILTH_ATTEMPTS", 1),
        parallel=_int(env, "TILTH_PARALLEL"),
        database_url=env.get("TILTH_DATABASE_URL") or None,
        queue_keep_days=int_setting(env, "TILTH_QUEUE_KEEP_DAYS", 7),
        sign_commits=_choice(env, "TILTH_SIGN_COMMITS", ("on", "off"), "off") == "on",
        env=env,
        warnings=tuple(warnings),
    )


_ROLE_PREFIX = {"worker": "TILTH", "evaluator": "TILTH_EVALUATOR", "prep": "TILTH_PREP"}


def resolve_endpoint(env: Mapping[str, str], role: Role) -> Endpoint:
    """Resolve ``role``'s endpoint; each setting falls back to the worker's."""
    prefix = _ROLE_PREFIX[role]
    base_url = env.get(f"{prefix}_BASE_URL") or env.get("TILTH_BASE_URL")
    api_key = env.get(f"{prefix}_API_KEY") or env.get("TILTH_API_KEY")
    model = env.get(f"{prefix}_MODEL") if role != "worker" else None
    model = model or env.get("TILTH_WORKER_MODEL")
    missing = [
        name
        for name, value in (
            ("TILTH_BASE_URL", base_url),
            ("TILTH_API_KEY", api_key),
            ("TILTH_WORKER_MODEL", model),
        )
        if not value
    ]
    if missing:
        raise ConfigError(
            f"missing required setting(s) for {role} model calls: {', '.join(missing)}",
            hint="set them in the environment or in $TILTH_HOME/.env (see README, Configuration)",
        )
    assert base_url and api_key and model
    return Endpoint(role=role, base_url=base_url, api_key=api_key, model=model)


def secret_values(env: Mapping[str, str]) -> list[str]:
    """Every API key in ``env``, so callers can scrub them from output and child processes."""
    return [v for k, v in env.items() if k.endswith("_API_KEY") and v]
