"""SPEC §5.4 as a new user meets it: ``pip install <checkout>`` (no extras, so no pytest) into a
fresh virtualenv, then a project whose own environment holds what its tests need.

1. The project keeps a gitignored ``.venv/`` holding pytest and a module that exists nowhere
   else; ``prep-feature`` then ``run`` finish ``all_done`` with no ``TILTH_TEST_COMMAND``.
2. A project without one builds a worktree-local ``.venv/`` with ``TILTH_SETUP_COMMAND``.
3. ``tilth demo`` tells its whole story offline (SPEC §9), the suite's one run of the demo.
4. The wheel ships the web UI's templates and static files (a pip install has no repo).

Slow (it installs packages); one module, never skipped. The wheel is built once, without an
isolated build environment (hatchling is a test extra). The installs go through ``uv pip
install`` when ``make venv`` put uv beside this suite's python (a second where pip spends ten
CPU seconds resolving): uv installs the same wheel's files and its dependencies, no extras, into
the same plain virtualenv, so what is proven is what ``pip install`` leaves. Where uv is absent
or cannot reach an index (it reads no pip configuration), pip installs instead. Nothing is
byte-compiled at install time: as on a user's machine (no ``PYTHONDONTWRITEBYTECODE`` in their
shell), each program compiles what it imports on its first start and keeps it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import GIT_IDENTITY, make_repo
from tests.e2e.demo_runner import check_demo_story, run_demo
from tests.sessionview import SessionView
from tilth.demo.script import EVALUATOR, INTERVIEWER, WORKER, Interview, Recipe, Team
from tilth.model import FakeServer, Script

CHECKOUT = Path(__file__).resolve().parents[2]
HELPER = "zebra_only_here"
HELPER_SOURCE = "def stripes() -> int:\n    return 42\n"
TASK = {
    "id": "T-001",
    "title": "Count stripes",
    "description": f"Add zoo.count.stripes() returning {HELPER}.stripes().",
    "acceptance_criteria": ["zoo.count.stripes() equals the helper's value"],
}
TEST = (
    f"from {HELPER} import stripes as expected\n"
    "from zoo.count import stripes\n\n\n"
    "def test_stripes_come_from_the_helper():\n"
    "    assert stripes() == expected() == 42\n"
)
CODE = f"from {HELPER} import stripes as _stripes\n\n\ndef stripes():\n    return _stripes()\n"
WORKER_CHECK = "python -m pytest -q tests/test_t001_stripes.py"


def fresh_venv(where: Path) -> Path:
    """A new virtualenv at ``where``, its python returned. Made without pip (ensurepip costs
    seconds each time): ``pip`` installs into it from outside, as ``pip --python`` does."""
    venv.EnvBuilder(with_pip=False).create(where)
    return where / "bin" / "python"


PIP_INTO = [sys.executable, "-m", "pip", "--python"]
"""This suite's pip, installing into another interpreter (``PIP_INTO <python> install``)."""


INSTALL = ["install", "-q", "--disable-pip-version-check", "--no-compile"]
"""``pip install`` without byte-compiling every dependency (most of an install's CPU): what a
program imports is compiled when it first starts (``user_env`` lets it keep the result)."""

UV = Path(sys.executable).with_name("uv")
"""The uv ``make venv`` installs beside this suite's python (absent in a venv made otherwise)."""


def pip(python: Path, *args: str) -> None:
    """``pip install <args>`` into ``python``'s virtualenv: through uv when it is there and
    succeeds (uv does not byte-compile unless asked), else through this suite's pip."""
    if UV.is_file():
        command = [str(UV), "pip", "install", "-q", "--python", str(python), *args]
        if subprocess.run(command, capture_output=True, timeout=600).returncode == 0:
            return
    done = subprocess.run(
        [*PIP_INTO, str(python), *INSTALL, *args], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def build_wheel(into: Path) -> Path:
    """The checkout's wheel, built by this suite's hatchling: no isolated build environment
    (pip would install hatchling into a new one for every build)."""
    command = ["wheel", "-q", "--no-deps", "--no-build-isolation", "--disable-pip-version-check"]
    done = subprocess.run(
        [sys.executable, "-m", "pip", *command, "-w", str(into), str(CHECKOUT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (wheel,) = into.glob("tilth-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def plain_tilth(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tilth`` from ``pip install <its wheel>`` into a fresh virtualenv: no pytest in it."""
    root = tmp_path_factory.mktemp("plain-install")
    python = fresh_venv(root / "venv")
    pip(python, str(wheel))
    probe = subprocess.run([str(python), "-c", "import pytest"], capture_output=True)
    assert probe.returncode != 0, "the plain install must not bring pytest"
    return root / "venv" / "bin" / "tilth"


@pytest.fixture(scope="module")
def project_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv holding pytest and the helper module (which exists nowhere else), built
    once: each project copies it whole (``cp -a``) as its own ``.venv/``. A copy is a working
    virtualenv: it finds its packages from where its ``bin/python`` is."""
    root = tmp_path_factory.mktemp("project-venv") / "venv"
    pip(fresh_venv(root), "pytest")
    (site,) = (root / "lib").glob("python*/site-packages")
    (site / f"{HELPER}.py").write_text(HELPER_SOURCE)
    return root


def users_shell() -> dict[str, str]:
    """This environment as a user's shell has it: no TILTH_* or virtualenv, no python3 with
    pytest from the tests on PATH, and bytecode written (this suite's environment says
    ``PYTHONDONTWRITEBYTECODE``; with it, every start of the plain install, installed without
    compiling, would compile all it imports again)."""
    drop = ("TILTH_", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if "project-python" not in p
    )
    return env


@pytest.fixture
def server() -> Iterator[FakeServer]:
    team = Team(
        recipes={"T-001": Recipe(files={"zoo/count.py": CODE}, test_command=WORKER_CHECK)},
        interview=Interview(
            question="Should stripes be cached?",
            options=["no", "yes"],
            prd_entries=[TASK],
            test_files={"test_t001_stripes.py": TEST},
            tldr="- stripes for the zoo",
        ),
    )
    with FakeServer(Script(team)) as fake:
        yield fake


def user_env(server: FakeServer, home: Path, **extra: str) -> dict[str, str]:
    """A user's shell (``users_shell``) aimed at the fake server: no TILTH_TEST_COMMAND."""
    env = users_shell()
    env.update(GIT_IDENTITY)
    env.update(
        TILTH_HOME=str(home),
        TILTH_BASE_URL=server.base_url,
        TILTH_API_KEY="sk-e2e-plain-install",
        TILTH_WORKER_MODEL=WORKER,
        TILTH_EVALUATOR_MODEL=EVALUATOR,
        TILTH_PREP_MODEL=INTERVIEWER,
        TILTH_MODEL_MAX_RETRIES="0",
        TILTH_EMPTY_BACKOFF_SECONDS="0",
        **extra,
    )
    return env


def tilth(exe: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(exe), *args], input="1\n", capture_output=True, text=True, env=env, timeout=300
    )


def project(root: Path) -> Path:
    return make_repo(
        root,
        {
            ".gitignore": ".venv/\n__pycache__/\n",
            "zoo/__init__.py": "",
            "vendor/" + HELPER + ".py": HELPER_SOURCE,
            "README.md": "# zoo\n",
        },
    )


def bash_results(session: SessionView) -> list[str]:
    return [
        str(p["result_preview"]) for p in session.payloads("tool_result") if p["tool"] == "bash"
    ]


@pytest.mark.timeout(900)
def test_the_projects_own_venv_runs_the_seed_tests(
    plain_tilth: Path, project_venv: Path, server: FakeServer, tmp_path: Path
) -> None:
    repo = project(tmp_path / "zoo")
    shutil.copytree(project_venv, repo / ".venv", symlinks=True)  # the helper: only in .venv
    home = tmp_path / "home"
    env = user_env(server, home)
    prep = tilth(plain_tilth, env, "prep-feature", str(repo), "--brief", "count stripes")
    assert prep.returncode == 0, prep.stdout + prep.stderr
    run = tilth(plain_tilth, env, "run", str(repo))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"tests in  source repository's virtualenv {repo}/.venv" in run.stdout
    session = SessionView.only(home / "sessions")
    assert session.status == "all_done"
    (chosen,) = session.payloads("environment")
    assert chosen["kind"] == "source-venv"
    gates = session.payloads("tests_run")
    assert gates and all(g["passed"] for g in gates)
    # The worker's `python -m pytest` meant what the gate means: the project's venv.
    assert any("1 passed" in text for text in bash_results(session))


@pytest.mark.timeout(900)
def test_a_setup_command_builds_a_worktree_venv(
    plain_tilth: Path, project_venv: Path, server: FakeServer, tmp_path: Path
) -> None:
    repo = project(tmp_path / "zoo")
    # The command is the user's own; this one copies the module's venv (a pip install is
    # network time, and what Tilth does with a setup command is the same for any command).
    setup = f"cp -a {shlex.quote(str(project_venv))} .venv && test -x .venv/bin/python"
    home = tmp_path / "home"
    env = user_env(server, home, TILTH_SETUP_COMMAND=setup)
    prep = tilth(plain_tilth, env, "prep-feature", str(repo), "--brief", "count stripes")
    assert prep.returncode == 0, prep.stdout + prep.stderr
    run = tilth(plain_tilth, env, "run", str(repo))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    session = SessionView.only(home / "sessions")
    assert session.status == "all_done"
    (setup_event,) = session.payloads("setup")
    assert setup_event["ok"] is True and setup_event["why"] == "prep"
    (chosen,) = session.payloads("environment")
    assert chosen["kind"] == "worktree-venv"
    assert not (repo / ".venv").exists(), "the source repository is never touched"
    assert any("1 passed" in text for text in bash_results(session))


@pytest.mark.timeout(600)
def test_the_demo_tells_the_whole_story_offline_from_a_plain_install(
    plain_tilth: Path, tmp_path: Path
) -> None:
    demo = run_demo(plain_tilth, tmp_path, users_shell())
    check_demo_story(demo, tmp_path / "home")
    assert "No module named pytest" not in demo.stdout + demo.stderr
    assert "tests in  TILTH_TEST_COMMAND:" in demo.stdout and "run_tests.py" in demo.stdout


def test_the_wheel_holds_every_template_and_static_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    web = CHECKOUT / "tilth" / "web"
    shipped = [p for p in (*web.glob("templates/*"), *web.glob("static/*")) if p.is_file()]
    assert len(shipped) >= 9
    for path in shipped:
        assert path.relative_to(CHECKOUT).as_posix() in names
    assert "tilth/py.typed" in names  # the library's types reach its users' type checkers
