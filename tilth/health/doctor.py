"""``tilth doctor``'s workspace checks: everything a real run needs, as a list of ``Check`` rows.

Each checker takes a ``DoctorContext`` and returns rows; ``CHECKERS`` is the list ``run_checks``
goes through (a new check is one more entry). A row that is not ``ok`` carries the one thing
to do (``fix``). Only ``required`` rows decide whether a real run could start.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tilth import git
from tilth.config import ROLES, Endpoint, Settings, find_env_file, read_env_file
from tilth.errors import ConfigError, TilthError
from tilth.model.endpoint_facts import (
    DEFAULT_CONTEXT_TOKENS,
    NO_TOOLS_FIX,
    facts_from_props,
    get_json,
    model_ids,
    server_root,
    window_from_models,
)

ENDPOINT_TIMEOUT = 10.0
SMALLEST_USEFUL_WINDOW = 4096
"""Below this a stage's first request (instructions, tools, the task) leaves no room to work."""
LOW_DISK_BYTES = 1 << 30
SECRET_SUFFIX = "_API_KEY"


@dataclass(frozen=True)
class Check:
    """One row of the doctor's table."""

    name: str
    ok: bool
    detail: str
    fix: str | None = None
    """The one thing to do when not ok."""
    required: bool = True
    """False: a warning; the run can start anyway."""


@dataclass
class DoctorContext:
    """What the checkers look at: the workspace and the settings (as loaded, or why not)."""

    workspace: Path
    settings: Settings | None
    settings_error: ConfigError | None = None
    source: Path | None = None
    """The workspace's repository root, once the repository check found one (it may have no
    commits yet: a first run is often on a young repository, whose environment still counts)."""
    _reached: dict[tuple[str, str], tuple[Check, Any]] = field(default_factory=dict)
    """``/models`` per (base URL, key): the row and the parsed body."""
    _props: dict[tuple[str, str], Any] = field(default_factory=dict)
    """llama.cpp's ``/props`` per (base URL, key), None where there is none."""


Checker = Callable[[DoctorContext], Iterable[Check]]


# ---- settings ------------------------------------------------------------------------------------
def check_settings(ctx: DoctorContext) -> Iterable[Check]:
    """Every TILTH_* value that is set, where it came from; API keys never shown."""
    if ctx.settings is None:
        assert ctx.settings_error is not None
        yield Check("settings", False, ctx.settings_error.message, ctx.settings_error.hint)
        return
    for problem in ctx.settings.warnings:
        # The line's setting is not in effect: said here, where settings are checked.
        yield Check("settings", False, problem, "fix or remove that line", required=False)
    origins = setting_origins()
    if not origins:
        yield Check("settings", True, "none set; every setting has its default")
    for name, origin in sorted(origins.items()):
        value = ctx.settings.env.get(name, "")
        shown = "(set, not shown)" if name.endswith(SECRET_SUFFIX) else value
        yield Check(name, True, f"{shown}  [{origin}]")


def setting_origins(environ: dict[str, str] | None = None) -> dict[str, str]:
    """``TILTH_*`` name → where its value comes from: the environment or a ``.env`` file."""
    environ = dict(os.environ) if environ is None else environ
    origins: dict[str, str] = {}
    try:
        env_file = find_env_file(environ)
        file_values = read_env_file(env_file)[0] if env_file else {}
    except ConfigError:
        env_file, file_values = None, {}
    for name in file_values:
        if name.startswith("TILTH_"):
            origins[name] = f"from {env_file}"
    for name, value in environ.items():
        if name.startswith("TILTH_") and value.strip():
            origins[name] = "from the environment"
    return origins


# ---- model endpoints -----------------------------------------------------------------------------
def check_endpoints(ctx: DoctorContext) -> Iterable[Check]:
    """Each role's endpoint answers ``GET /models`` with its key (the key is never shown),
    lists the role's model, can take tool calls (llama.cpp's ``/props``); its context window."""
    if ctx.settings is None:
        return
    for role in ROLES:
        name = f"{role} model"
        try:
            endpoint = ctx.settings.endpoint(role)
        except ConfigError as exc:
            yield Check(name, False, exc.message, exc.hint)
            continue
        key = (endpoint.base_url, endpoint.api_key)
        if key not in ctx._reached:
            ctx._reached[key] = probe_endpoint(endpoint)
        found, body = ctx._reached[key]
        if not found.ok:
            yield Check(name, False, found.detail, found.fix, found.required)
            continue
        if key not in ctx._props:
            ctx._props[key] = get_json(
                server_root(endpoint.base_url) + "/props", endpoint.api_key, ENDPOINT_TIMEOUT
            )
        yield from _model_rows(ctx.settings, endpoint, found, body, ctx._props[key])


def _model_rows(
    settings: Settings, endpoint: Endpoint, found: Check, body: Any, props: Any
) -> Iterable[Check]:
    """The role's row (listed, context window) and, when the server says so, a tools warning."""
    role, model = endpoint.role, endpoint.model
    where = f"{model} at {endpoint.base_url}"
    names = model_ids(body)
    n_ctx, tools = facts_from_props(props)
    if names is not None and model not in names:
        shown = ", ".join(names[:5]) + (" …" if len(names) > 5 else "") or "none"
        setting = "TILTH_WORKER_MODEL" if role == "worker" else f"TILTH_{role.upper()}_MODEL"
        yield Check(
            f"{role} model",
            False,
            f"{where}: {found.detail}, but {model} is not one of them ({shown})",
            f"check {setting}: the endpoint does not serve {model}",
        )
        return
    window, source = window_from_models(body, model)
    if n_ctx is not None:
        window, source = n_ctx, "/props n_ctx"
    if window is None and settings.context_tokens:
        window, source = settings.context_tokens, "TILTH_CONTEXT_TOKENS"
    context = (
        f"context {window:,} tokens ({source})"
        if window
        else f"context window unknown: {DEFAULT_CONTEXT_TOKENS:,} assumed (TILTH_CONTEXT_TOKENS)"
    )
    listed = "" if names is None else f"; {model} listed"
    yield Check(f"{role} model", True, f"{where}: {found.detail}{listed}; {context}")
    if window and window < SMALLEST_USEFUL_WINDOW:
        yield Check(
            f"{role} context",
            False,
            f"a {window:,}-token window is too small: Tilth's instructions and tool schemas "
            f"take about 2,500 tokens before any work, and each reply needs room of its own",
            f"give the model at least {SMALLEST_USEFUL_WINDOW:,} tokens "
            "(llama-server -c 8192; Ollama's num_ctx; vLLM's --max-model-len)",
            required=False,
        )
    if tools is False:
        yield Check(
            f"{role} tools",
            False,
            f"{endpoint.base_url} cannot take tool calls: its chat template has no tool support "
            "(/props chat_template_caps.supports_tools is false), so the model never sees "
            "Tilth's tools",
            NO_TOOLS_FIX,
            required=False,
        )


def probe_endpoint(endpoint: Endpoint, timeout: float = ENDPOINT_TIMEOUT) -> tuple[Check, Any]:
    """``GET <base_url>/models`` with the key: a row saying what came back, and the body."""
    url = endpoint.base_url.rstrip("/") + "/models"
    role = endpoint.role.upper()
    var = "TILTH_BASE_URL" if endpoint.role == "worker" else f"TILTH_{role}_BASE_URL"
    key_var = var.replace("BASE_URL", "API_KEY")
    headers = {"Authorization": f"Bearer {endpoint.api_key}", "Accept": "application/json"}
    try:
        # Inside the try: a malformed URL ("not a url", "http://[::1") fails this check.
        request = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            detail = f"{url} refused the key (HTTP {exc.code})"
            return Check("", False, detail, f"check {key_var}"), None
        if exc.code == 404:
            detail = f"{url} has no /models route (HTTP 404); the endpoint may still work"
            fix = f"check {var} (it should be the API root, often ending in /v1)"
            return Check("", False, detail, fix, required=False), None
        return Check("", False, f"{url} answered HTTP {exc.code}", f"check {var}"), None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        text = str(reason).removeprefix("[Errno 111] ").strip() or type(exc).__name__
        fix = f"check {var}; is the server up?"
        return Check("", False, f"cannot reach {url}: {text}", fix), None
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        data = None
    names = model_ids(data)
    if names is None:
        return Check("", True, "reachable (the model list could not be read)"), None
    return Check("", True, f"reachable, {len(names)} model(s)"), data


# ---- the repository and git ----------------------------------------------------------------------
def check_repository(ctx: DoctorContext) -> Iterable[Check]:
    """The workspace is a repository Tilth can work in; the identity its commits will carry."""
    try:
        ctx.source = git.ensure_repo(ctx.workspace)
    except TilthError as exc:
        yield Check("repository", False, exc.message, exc.hint)
        try:
            ctx.source = git.ensure_repo(ctx.workspace, require_commit=False)
        except TilthError:
            return  # not a repository Tilth could use even with a first commit
    else:
        yield Check("repository", True, str(ctx.source))
    name = git.git("config", "user.name", cwd=ctx.source, check=False).strip()
    email = git.git("config", "user.email", cwd=ctx.source, check=False).strip()
    if name and email:
        yield Check("git identity", True, f"{name} <{email}>")
    else:
        fallback = f"{git.FALLBACK_NAME} <{git.FALLBACK_EMAIL}>"
        yield Check(
            "git identity",
            False,
            f"none configured; stage commits will be made as {fallback}",
            'git config --global user.name "Your Name" && '
            "git config --global user.email you@example.com",
            required=False,
        )


# ---- the test environment ------------------------------------------------------------------------
def check_environment(ctx: DoctorContext) -> Iterable[Check]:
    """The environment the seed tests will run in (SPEC §5.4), and that it starts."""
    if ctx.settings is None or ctx.source is None:
        # Said, not left out: the row a user looks for before a first run.
        why = (
            "the settings did not load (see the settings row)"
            if ctx.settings is None
            else f"{ctx.workspace} is not a repository Tilth can use (see the repository row)"
        )
        fix = "fix that first, then run tilth doctor again"
        yield Check("test environment", False, f"cannot tell: {why}", fix, required=False)
        return
    from tilth.environment.project import check_project_env, resolve_project_env

    try:
        env = resolve_project_env(ctx.source, ctx.source, ctx.settings)
        check_project_env(env, ctx.source)
    except TilthError as exc:
        if ctx.settings.setup_command:
            yield Check(
                "test environment",
                True,
                "decided in each new worktree after TILTH_SETUP_COMMAND "
                f"({ctx.settings.setup_command}) has run; here: {exc.message}",
            )
            yield from _worktree_venv_ignored(ctx.source)
            return
        yield Check("test environment", False, exc.message, exc.hint)
        return
    yield Check("test environment", True, env.description)
    if env.kind == "uv" or ctx.settings.setup_command:
        yield from _worktree_venv_ignored(ctx.source)
    if ctx.settings.setup_command:
        yield Check(
            "setup command", True, f"runs in every new worktree: {ctx.settings.setup_command}"
        )


def _worktree_venv_ignored(source: Path) -> Iterable[Check]:
    """A ``.venv/`` made in each worktree must be gitignored, or stage commits would take it."""
    ignored = git.ok("check-ignore", "-q", "--no-index", ".venv/", cwd=source)
    if not ignored:
        yield Check(
            "worktree .venv",
            False,
            ".venv/ is not gitignored: a virtualenv made in the worktree would be committed",
            "add `.venv/` to the repository's .gitignore",
            required=False,
        )


# ---- the machine ---------------------------------------------------------------------------------
def _read_int(path: str) -> int | None:
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def check_file_watch(ctx: DoctorContext) -> Iterable[Check]:
    """inotify limits against the workspace's directories (turn snapshots watch each one)."""
    watches = _read_int("/proc/sys/fs/inotify/max_user_watches")
    instances = _read_int("/proc/sys/fs/inotify/max_user_instances")
    if watches is None or instances is None:
        yield Check(
            "file watching",
            True,
            "no inotify here: changes made by bash are found by scanning (slower on big trees)",
        )
        return
    dirs = _directory_count(ctx.source) if ctx.source is not None else 0
    detail = (
        f"inotify: {watches:,} watches, {instances} instances; the workspace has ~{dirs:,} "
        + ("directory" if dirs == 1 else "directories")
    )
    if dirs and dirs > watches // 2:
        yield Check(
            "file watching",
            False,
            detail + " (too few watches: Tilth falls back to slower scanning)",
            "sudo sysctl fs.inotify.max_user_watches=524288",
            required=False,
        )
        return
    yield Check("file watching", True, detail)


def _directory_count(source: Path) -> int:
    try:
        files = git.git("ls-files", cwd=source).splitlines()
    except TilthError:
        return 0
    return len({str(Path(f).parent) for f in files}) + 1


def check_disk(ctx: DoctorContext) -> Iterable[Check]:
    """The sessions directory: writable, and the disk it is on has room."""
    if ctx.settings is None:
        return
    where = ctx.settings.sessions_dir
    existing = where
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        yield Check(
            "sessions disk",
            False,
            f"{existing} is a file, not a directory (sessions go to {where})",
            "point TILTH_SESSIONS_DIR (or TILTH_HOME) at a directory, or move that file away",
        )
        return
    if not os.access(existing, os.W_OK):
        yield Check(
            "sessions disk",
            False,
            f"{existing} is not writable (sessions go to {where})",
            "point TILTH_SESSIONS_DIR (or TILTH_HOME) at a directory you can write",
        )
        return
    usage = shutil.disk_usage(existing)
    free = f"{usage.free / (1 << 30):.1f} GiB free of {usage.total / (1 << 30):.1f} GiB"
    if usage.free < LOW_DISK_BYTES:
        yield Check(
            "sessions disk",
            False,
            f"{where}: only {free}",
            "free some space, or point TILTH_SESSIONS_DIR at a bigger disk",
            required=False,
        )
        return
    yield Check("sessions disk", True, f"{where}: {free}")


def check_sandbox(ctx: DoctorContext) -> Iterable[Check]:
    """The worker's ``bash`` sandbox (``TILTH_SANDBOX``): used, or why not."""
    if ctx.settings is None:
        return
    from tilth.tools.sandbox import INSTALL_HINT, sandbox_status

    usable, detail = sandbox_status(ctx.settings)
    mode = ctx.settings.sandbox
    if usable:
        yield Check("sandbox", True, f"{detail}  [TILTH_SANDBOX={mode}]")
    elif mode == "off":
        yield Check("sandbox", False, detail, "set TILTH_SANDBOX=auto", required=False)
    else:
        # auto runs unsandboxed (a loud warning at run start); required refuses to run.
        yield Check(
            "sandbox",
            False,
            f"the worker's bash would run WITHOUT a sandbox: {detail}  [TILTH_SANDBOX={mode}]",
            INSTALL_HINT,
            required=mode != "auto",  # required, bwrap and landlock refuse to run
        )


CHECKERS: list[Checker] = [
    check_settings,
    check_endpoints,
    check_repository,
    check_environment,
    check_file_watch,
    check_disk,
    check_sandbox,
]
"""Run in order; a checker may rely on what an earlier one found (``ctx.source``)."""


def run_checks(ctx: DoctorContext, checkers: Iterable[Checker] = CHECKERS) -> list[Check]:
    """Every row, in order."""
    return [check for checker in checkers for check in checker(ctx)]


def ready(checks: Iterable[Check]) -> bool:
    """True when a real run could start: every required check passed."""
    return all(check.ok for check in checks if check.required)


def as_dicts(checks: Iterable[Check]) -> list[dict[str, object]]:
    return [asdict(check) for check in checks]
