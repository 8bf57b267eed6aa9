"""Shared fixtures: real git repositories, an isolated TILTH_HOME, the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.warm_cli import WarmCli
from tests.warm_cli import shared as warm_cli_process

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Test User",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test User",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


_SESSION_HOME: list[str] = []

pytest_plugins = ("doctor_story",)  # the doctor's story: one run, shared by three modules


def pytest_configure(config: pytest.Config) -> None:
    """No test may touch the developer's real ~/.tilth or use their real model settings."""
    import tempfile

    for key in list(os.environ):
        if key.startswith("TILTH_"):
            del os.environ[key]
    _sigint_as_on_a_terminal()
    home = tempfile.mkdtemp(prefix="tilth-test-home-")
    _SESSION_HOME.append(home)
    os.environ["TILTH_HOME"] = home
    # Outside TILTH_HOME, which the worker's sandbox hides.
    python_root = tempfile.mkdtemp(prefix="tilth-test-python-")
    _SESSION_HOME.append(python_root)
    _project_python_on_path(Path(python_root))
    if not hasattr(config, "workerinput"):
        _compile_tilth()
        if config.getoption("numprocesses", None):
            _rewrite_test_modules()


def _sigint_as_on_a_terminal() -> None:
    """Give SIGINT its default disposition, as a command typed at a terminal has.

    A runner that starts the suite as a background job of a non-interactive shell (CI does)
    hands every process SIGINT *ignored*, and an ignored signal stays ignored across exec:
    the tests that press Ctrl-C at a prompt would wait for an exit that never comes. Set here
    (controller and every xdist worker), each CLI the tests start inherits the default.
    """
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _compile_tilth() -> None:
    """Byte-compile the package once, as ``pip install`` does.

    The suite starts Tilth as a new process a few hundred times; where the environment says
    ``PYTHONDONTWRITEBYTECODE`` (this checkout is an editable install) each start would compile
    every module it imports again, about 80 ms apiece. Compiled once here (the controller,
    before any worker starts), every start reads the bytecode.
    """
    import compileall

    import tilth

    compileall.compile_dir(Path(tilth.__file__).parent, quiet=1)


def _rewrite_test_modules() -> None:
    """Assertion-rewrite every test module once, here in the controller, and keep the result.

    Under ``PYTHONDONTWRITEBYTECODE`` pytest rewrites each test module anew in every
    worker, and rewriting this suite's asserts costs about four seconds of CPU a worker.
    pytest reads a cached rewrite even when it may not write one, so importing the modules
    here once, with writing allowed, spares every worker the work (and later runs: a
    cached rewrite is used only while its source is unchanged).
    """
    import importlib

    root = Path(__file__).resolve().parent
    tail = f".{sys.implementation.cache_tag}-pytest-{pytest.__version__}.pyc"
    stale = [
        path
        for path in sorted(root.rglob("test_*.py"))
        if not _newer(path.parent / "__pycache__" / (path.stem + tail), path)
    ]
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, False
    try:
        for path in stale:
            importlib.import_module(".".join(path.relative_to(root.parent).with_suffix("").parts))
    finally:
        sys.dont_write_bytecode = saved


def _newer(cached: Path, source: Path) -> bool:
    try:
        return cached.stat().st_mtime >= source.stat().st_mtime
    except OSError:
        return False


def _project_python_on_path(root: Path) -> None:
    """Put a project interpreter that has pytest first on PATH (SPEC §5.4, step 5).

    Tilth never runs a project's tests with its own interpreter, and the test projects keep
    no virtualenv of their own; so, like a developer's machine, the tests' PATH has a
    ``python3`` (a venv outside Tilth's installation) that can import pytest.
    """
    import site
    import venv

    project = root / "project-python"
    venv.EnvBuilder(with_pip=False).create(project)
    (site_dir,) = project.glob("lib/python*/site-packages")
    (site_dir / "tilth-test-packages.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    # The test projects' seed tests need no plugin; loading the suite's own (xdist,
    # hypothesis, playwright...) made each gate run cost a second of CPU instead of 0.2.
    (site_dir / "sitecustomize.py").write_text(
        "import os\nos.environ.setdefault('PYTEST_DISABLE_PLUGIN_AUTOLOAD', '1')\n"
    )
    os.environ["PATH"] = f"{project / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"


GROUPS = (
    ("tests/e2e/test_plain_install_e2e.py", "plain-install"),
    ("tests/e2e/", "e2e-lab"),
    ("tests/security/test_attacks.py", "attacked-runs"),
    ("tests/cli/test_doctor_repair.py", "doctor-story"),
    ("tests/cli/test_damaged_state.py", "doctor-story"),
    ("tests/session/test_damaged_records.py", "doctor-story"),
)
"""Tests that share one expensive fixture run on one worker: the plain install's venv
(module-scoped), the e2e lab (the story built once, and the demo started beside it), the
attacked runs (a whole run per backend) and the doctor's saved story (a whole run, which
three modules share: ``tests/doctor_story.py``): split over both workers, each worker would
build the fixture again."""

SLOW_FIRST = (
    "tests/e2e/test_plain_install_e2e.py",
    "tests/e2e/",
    "tests/web/test_load.py",
    "tests/timeline/test_turn_state_machine.py",
    "tests/web/test_runs.py",
    "tests/timeline/test_faults.py",
    "tests/agent/test_faults.py",
    "tests/test_proc.py",
    "tests/chat/test_chat_tty.py",
    "tests/web/test_browser",
)
"""Handed out first: ``--dist loadgroup`` gives work out in collection order, so the long
units start early and both workers run out of short tests at about the same time instead
of one waiting for the other's last long one."""


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` means two workers per core (at most eight).

    Much of a test's time is spent waiting: on a process it started, a browser, a server
    thread, a pseudo-terminal. One worker per core leaves the cores idle a third of the
    time; two keep them busy. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still decides when set.
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return min(8, 2 * len(os.sched_getaffinity(0)))


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """``--dist loadgroup`` with ``GROUPS`` as the groups, named by node id.

    xdist's own ``xdist_group`` mark has no effect under pytest 9 (xdist 3.8 renames the
    item through an attribute pytest no longer reads), so the groups are given here, to the
    scheduler, which sees only node ids.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Grouped(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            for prefix, group in GROUPS:
                if nodeid.startswith(prefix):
                    return group
            return nodeid  # every other test is a unit of its own

    return Grouped(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``SLOW_FIRST`` first, then the rest in their own order."""

    def rank(item: pytest.Item) -> int:
        for n, prefix in enumerate(SLOW_FIRST, start=1):
            if item.nodeid.startswith(prefix):
                return n
        return len(SLOW_FIRST) + 1

    items.sort(key=rank)


def pytest_unconfigure(config: pytest.Config) -> None:
    import shutil

    for home in _SESSION_HOME:
        shutil.rmtree(home, ignore_errors=True)


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` for test set-up; fail loudly."""
    env = {**os.environ, **GIT_IDENTITY}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout


def make_repo(path: Path, files: Mapping[str, str] | None = None) -> Path:
    """A git repository at ``path`` with one commit holding ``files``."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, content in (files or {"README.md": "# sample\n"}).items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path.resolve()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small real git repository with one commit."""
    return make_repo(
        tmp_path / "repo",
        {"README.md": "# sample\n", "src/app.py": "def hello():\n    return 'hi'\n"},
    )


@pytest.fixture
def tilth_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated TILTH_HOME (sessions under it); TILTH_* from the outer env removed."""
    for key in list(os.environ):
        if key.startswith("TILTH_"):
            monkeypatch.delenv(key, raising=False)
    home = tmp_path / "tilth-home"
    home.mkdir()
    monkeypatch.setenv("TILTH_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    for key, value in GIT_IDENTITY.items():
        monkeypatch.setenv(key, value)
    return home


@pytest.fixture
def warm_cli() -> WarmCli:
    """Tilth commands as real processes forked from a warm one (``tests/warm_cli.py``)."""
    return warm_cli_process()


@pytest.fixture
def sessions_dir(tilth_home: Path) -> Path:
    return tilth_home / "sessions"


def run_cli(
    *args: str,
    input_text: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run the real ``tilth`` CLI (stdin not a TTY): in this process, or in a subprocess when
    a fault is injected (it SIGKILLs its process) or ``cwd`` is given."""
    if "TILTH_FAULT_AT" not in (env or {}) and cwd is None:
        return run_cli_in_process(*args, input_text=input_text or "", env=env)
    full_env = {**os.environ, **(env or {})}
    full_env.pop("TILTH_DEBUG", None)
    return warm_cli_process().run(
        list(args), env=full_env, cwd=cwd, input_text=input_text or "", timeout=timeout
    )


def run_cli_in_process(
    *args: str, input_text: str = "", env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI in this process (for parsing and printing); same result shape as ``run_cli``.

    Signals and exit codes of a real process are what ``run_cli`` is for.
    """
    import contextlib
    import io

    from tilth.cli import main

    saved = {key: os.environ.get(key) for key in (env or {})}
    out, err = io.StringIO(), io.StringIO()
    stdin = sys.stdin
    try:
        os.environ.update(env or {})
        os.environ.pop("TILTH_DEBUG", None)
        sys.stdin = io.StringIO(input_text)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        sys.stdin = stdin
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return subprocess.CompletedProcess(["tilth", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture
def cli(tilth_home: Path) -> Iterator[object]:
    """``cli("sessions", "--json")`` runs the real CLI against the isolated home."""
    yield run_cli
