"""Project shapes the seed-test gate must accept when the worker's code is right.

Each test is a small real project (a git repository whose last commit is the seed) with a
correct implementation written after the seed, run through the gate as a session runs it:
the seed commit's copies, in the project's interpreter. A false failure here blocks every
user whose project has that shape.
"""

from __future__ import annotations

import json
import os
import shutil
import venv
from importlib import metadata
from pathlib import Path

import pytest

from tests.conftest import git, make_repo
from tests.security.conftest import require_sandbox
from tilth.agent.gate.seed_tests import GateRun, run_gate
from tilth.config import Settings
from tilth.environment.project import ProjectEnv, resolve_project_env
from tilth.tools import ToolBox
from tilth.tools.sandbox import sandbox_for

# The tests' project interpreter (first python3 on PATH; see tests/conftest.py).
PYTHON = Path(shutil.which("python3") or "python3")
ENV = ProjectEnv("python", "python3 on PATH", bin_dir=PYTHON.parent, python=PYTHON)

ADD_TEST = "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
ADD = "def add(a, b):\n    return a + b\n"


PYTEST_DISTS = ("pytest", "pluggy", "iniconfig", "packaging", "pygments")


def project_venv(root: Path, *dists: str) -> ProjectEnv:
    """A virtualenv at ``root`` with pytest and ``dists`` installed, their plugins loading as
    a user's do. Installed by linking the files this suite's environment has of each
    distribution (what pip would unpack), so no package index is needed."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    (site_dir,) = root.glob("lib/python*/site-packages")
    for name in (*PYTEST_DISTS, *dists):
        dist = metadata.distribution(name)
        base = Path(str(dist.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in dist.files or () if not str(f).startswith("..")}
        for top in sorted(tops - {"__pycache__"}):
            if (base / top).exists() and not (site_dir / top).exists():
                (site_dir / top).symlink_to(base / top)
        for script in dist.entry_points.select(group="console_scripts"):
            write_script(root, script.name, script.value)
    return ProjectEnv(
        "source-venv", str(root), venv=root, bin_dir=root / "bin", python=root / "bin" / "python"
    )


def write_script(venv_root: Path, name: str, target: str) -> None:
    """A console script in ``venv_root/bin``, as pip writes it."""
    module, function = target.split(":")
    script = venv_root / "bin" / name
    script.write_text(
        f"#!{venv_root / 'bin' / 'python'}\nimport sys\nfrom {module} import {function}\n"
        f"if __name__ == '__main__':\n    sys.exit({function}())\n"
    )
    script.chmod(0o755)


def seeded(root: Path, files: dict[str, str]) -> tuple[Path, str]:
    """A repository at ``root`` whose only commit (the seed) holds ``files``."""
    repo = make_repo(root, {".gitignore": "__pycache__/\n", **files})
    return repo, git(repo, "rev-parse", "HEAD").strip()


def seeded_worktree(source: Path, where: Path, files: dict[str, str]) -> tuple[Path, str]:
    """A session-like worktree of ``source`` at ``where`` whose seed commit adds ``files``."""
    git(source, "worktree", "add", "-q", "-b", "session/x", str(where))
    write(where, files)
    git(where, "add", "-A")
    git(where, "commit", "-qm", "seed")
    return where, git(where, "rev-parse", "HEAD").strip()


def write(repo: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(content)


def gate(repo: Path, sha: str, environment: ProjectEnv = ENV) -> GateRun:
    return run_gate(repo, ["T-001"], environment=environment, timeout=60, seed_sha=sha)


SYS_PATH_CONFTESTS = {
    "tests/conftest.py": "import os, sys\n\n"
    "sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'src'))\n",
    "conftest.py": "import sys\nfrom pathlib import Path\n\n"
    "sys.path.insert(0, str(Path(__file__).parent / 'src'))\n",
}


@pytest.mark.parametrize("conftest", sorted(SYS_PATH_CONFTESTS))
def test_a_conftest_that_puts_src_on_sys_path_beside_itself(tmp_path: Path, conftest: str) -> None:
    """The pre-``pythonpath`` idiom of src layouts: a conftest adds ``src`` relative to its own
    file; the seed's copy of that conftest must find the worktree's ``src``."""
    repo, sha = seeded(
        tmp_path / "proj",
        {
            "src/calc/__init__.py": "",
            conftest: SYS_PATH_CONFTESTS[conftest],
            "tests/test_t001_add.py": ADD_TEST,
        },
    )
    write(repo, {"src/calc/ops.py": ADD})
    run = gate(repo, sha)
    assert run.passed, run.report()


def test_seed_tests_read_files_relative_to_the_repository_root(tmp_path: Path) -> None:
    """``Path(__file__).parents[1]`` and the configuration's directory are the repository
    root in the worktree; they hold its files (as the worker left them) in the gate too."""
    repo, sha = seeded(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\npythonpath = .\n",
            "calc/__init__.py": "",
            "examples/pair.txt": "2 3\n",
            "tests/test_t001_add.py": "from pathlib import Path\n\nfrom calc.ops import add\n\n"
            "ROOT = Path(__file__).resolve().parents[1]\n\n\n"
            "def test_add_the_example(pytestconfig):\n"
            "    a, b = (ROOT / 'examples' / 'pair.txt').read_text().split()\n"
            "    assert add(int(a), int(b)) == 5\n"
            "    assert (pytestconfig.inipath.parent / 'examples' / 'pair.txt').exists()\n\n\n"
            "def test_the_version_is_declared():\n"
            "    assert 'version = \"2.0\"' in (ROOT / 'pyproject.toml').read_text()\n",
        },
    )
    write(repo, {"calc/ops.py": ADD, "pyproject.toml": '[project]\nversion = "2.0"\n'})
    run = gate(repo, sha)
    assert run.passed, run.report()


@pytest.mark.parametrize("seed_config", [True, False])
def test_pytest_reads_only_the_seed_commits_configuration(
    tmp_path: Path, seed_config: bool
) -> None:
    """A configuration file the worker adds beside the ones the copy links in is never read:
    the gate names the seed's (or none), so pytest does not look for one."""
    config = {"pytest.ini": "[pytest]\naddopts = -ra\n"} if seed_config else {}
    repo, sha = seeded(
        tmp_path / "proj", {**config, "calc/__init__.py": "", "tests/test_t001_add.py": ADD_TEST}
    )
    bogus = "[pytest]\naddopts = ['--no-such-option']\n"
    write(repo, {"calc/ops.py": ADD, "pytest.toml": bogus, "tests/pytest.toml": bogus})
    run = gate(repo, sha)
    assert run.passed, run.report()
    write(repo, {"calc/ops.py": "def add(a, b):\n    return a - b\n"})
    run = gate(repo, sha)
    # The failure names the test by its path in the repository, as a run in the worktree does.
    assert not run.passed and "FAILED tests/test_t001_add.py::test_add" in run.report()
    assert "tilth-seed" not in run.report(), run.report()


@pytest.mark.parametrize(
    "options",
    [
        "cache_dir = .cache/pytest\naddopts = --strict-config",
        "addopts = --ff",
        "addopts = --lf --sw",
    ],
    ids=["cache_dir", "ff", "lf-sw"],
)
def test_a_configuration_that_relies_on_pytests_cache(tmp_path: Path, options: str) -> None:
    """``cache_dir`` under ``--strict-config`` and the cache's own options (``--ff``, ``--lf``,
    ``--sw``) in ``addopts`` are fine for pytest; the gate's run keeps its cache private."""
    repo, sha = seeded(
        tmp_path / "proj",
        {
            "pytest.ini": f"[pytest]\npythonpath = .\n{options}\n",
            "calc/__init__.py": "",
            "tests/test_t001_add.py": ADD_TEST,
        },
    )
    write(repo, {"calc/ops.py": ADD})
    run = gate(repo, sha)
    assert run.passed, run.report()
    assert not (repo / ".cache").exists() and not (repo / ".pytest_cache").exists()


@pytest.fixture(scope="module")
def xdist_env(tmp_path_factory: pytest.TempPathFactory) -> ProjectEnv:
    return project_venv(tmp_path_factory.mktemp("xdist") / ".venv", "pytest-xdist", "execnet")


def test_a_configuration_that_runs_tests_in_xdist_workers(
    tmp_path: Path, xdist_env: ProjectEnv
) -> None:
    """``addopts = -n auto`` (pytest-xdist): the gate runs the seed tests in its own process,
    where it sees what each did, instead of reporting that none was collected."""
    repo, sha = seeded(
        tmp_path / "proj",
        {
            "pyproject.toml": "[tool.pytest.ini_options]\npythonpath = ['src']\n"
            "addopts = '-n 2 --dist loadgroup'\n",
            "src/calc/__init__.py": "",
            "tests/test_t001_add.py": ADD_TEST,
        },
    )
    write(repo, {"src/calc/ops.py": "def add(a, b):\n    return a - b\n"})
    run = gate(repo, sha, xdist_env)
    assert not run.passed and "assert -1 == 5" in run.report(), run.report()
    write(repo, {"src/calc/ops.py": ADD})
    run = gate(repo, sha, xdist_env)
    assert run.passed, run.report()


def editable_install(
    env: ProjectEnv, name: str, path: Path, scripts: dict[str, str], plugins: str = ""
) -> None:
    """What ``pip install -e .`` writes for a project importing from ``path`` (a src layout):
    a ``.pth`` naming the directory, the distribution's metadata (with ``plugins`` as its
    ``pytest11`` entry points) and its console scripts."""
    assert env.venv is not None and env.python is not None
    (site_dir,) = env.venv.glob("lib/python*/site-packages")
    (site_dir / f"__editable__.{name}-0.1.pth").write_text(f"{path}\n")
    info = site_dir / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = [f"{script} = {target}" for script, target in scripts.items()]
    (info / "entry_points.txt").write_text(
        "[console_scripts]\n" + "\n".join(lines) + f"\n\n[pytest11]\n{plugins}\n"
    )
    url = json.dumps({"url": path.parent.as_uri(), "dir_info": {"editable": True}})
    (info / "direct_url.json").write_text(url)
    files = [f"__editable__.{name}-0.1.pth", *(f"{info.name}/{f.name}" for f in info.iterdir())]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))
    for script, target in scripts.items():
        write_script(env.venv, script, target)


CLI_TEST = """import subprocess
import sys


def test_the_cli_adds():
    for argv in ([sys.executable, '-m', 'calc'], ['calc']):
        out = subprocess.run([*argv, '2', '3'], capture_output=True, text=True)
        assert out.stdout.strip() == '5', out.stderr
"""


def test_a_cli_the_tests_run_as_a_subprocess_imports_the_worktrees_code(
    tmp_path: Path,
) -> None:
    """The source repository's ``.venv`` has the project installed editable (pointing at the
    repository's ``src``); a seed test runs its CLI (``python -m calc``, the ``calc`` console
    script) as a child process. The child must import the worktree's code, as it does in
    the worker's ``bash``, or the worker's change is invisible to it."""
    source = make_repo(
        tmp_path / "source",
        {
            ".gitignore": ".venv/\n__pycache__/\n",
            "src/calc/__init__.py": "",
            "src/calc/cli.py": "import sys\n\n\ndef main():\n    from calc.ops import add\n\n"
            "    print(add(*map(int, sys.argv[1:])))\n",
            "src/calc/__main__.py": "from calc.cli import main\n\nmain()\n",
        },
    )
    env = project_venv(source / ".venv")
    editable_install(env, "calc", source / "src", {"calc": "calc.cli:main"})
    worktree, sha = seeded_worktree(
        source, tmp_path / "worktree", {"tests/test_t001_cli.py": CLI_TEST}
    )
    write(worktree, {"src/calc/ops.py": ADD})
    settings = Settings(home=tmp_path / "home", sessions_dir=tmp_path / "sessions")
    chosen = resolve_project_env(worktree, source, settings)
    assert chosen.pythonpath == (worktree / "src",), chosen
    run = gate(worktree, sha, chosen)
    assert run.passed, run.report()
    bash = ToolBox(worktree, environment=chosen).dispatch(
        "bash", {"command": "python -m pytest -q -p no:cacheprovider tests/test_t001_cli.py"}
    )
    assert "[exit 0]" in bash.result, bash.result


def test_an_activated_virtualenv_outside_the_repository_with_the_project_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """virtualenvwrapper, pyenv-virtualenv, Poetry and Hatch keep the project's virtualenv
    outside the repository; activated, it is the ``python3`` first on PATH, and holds the
    project installed editable (pointing at the repository's ``src``). The seed tests and
    the worker's ``bash`` must import the worktree's ``src`` through it, not the user's."""
    source = make_repo(
        tmp_path / "source", {".gitignore": "__pycache__/\n", "src/calc/__init__.py": ""}
    )
    outside = project_venv(tmp_path / "virtualenvs" / "calc")
    editable_install(outside, "calc", source / "src", {})
    monkeypatch.setenv("PATH", f"{outside.bin_dir}{os.pathsep}{os.environ['PATH']}")
    worktree, sha = seeded_worktree(
        source, tmp_path / "worktree", {"tests/test_t001_add.py": ADD_TEST}
    )
    write(worktree, {"src/calc/ops.py": ADD})
    settings = Settings(home=tmp_path / "home", sessions_dir=tmp_path / "sessions")
    chosen = resolve_project_env(worktree, source, settings)
    assert chosen.kind == "python" and chosen.python == outside.bin_dir / "python3", chosen
    assert "editable install read from the worktree: src" in chosen.description
    run = gate(worktree, sha, chosen)
    assert run.passed, run.report()
    bash = ToolBox(worktree, environment=chosen).dispatch(
        "bash", {"command": "pytest -q -p no:cacheprovider tests/test_t001_add.py"}
    )
    assert "[exit 0]" in bash.result, bash.result
    # Sandboxed, the virtualenv (under /tmp here, which the sandbox replaces) is still the
    # interpreter's installation: not its base interpreter, with that one's packages.
    require_sandbox()
    sandbox = sandbox_for(settings, worktree, source=source, readable=chosen.readable_paths())
    run = run_gate(
        worktree, ["T-001"], environment=chosen, timeout=60, seed_sha=sha, sandbox=sandbox
    )
    assert run.passed, run.report()
    bash = ToolBox(worktree, environment=chosen, sandbox=sandbox).dispatch(
        "bash", {"command": "python -c 'import sys; print(sys.prefix)' && pytest -q tests"}
    )
    assert f"{outside.venv}\n" in bash.result and "[exit 0]" in bash.result, bash.result


PLUGIN_TEST = """pytest_plugins = ['pytester']


def test_the_double_answer_fixture(pytester):
    pytester.makepyfile('def test_it(double_answer):\\n    assert double_answer == 84\\n')
    pytester.runpytest().assert_outcomes(passed=1)
"""


def test_a_pytest_plugin_project_installed_editable_loads_the_worktrees_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The project is itself a pytest plugin (a ``pytest11`` entry point), installed editable
    in the repository's ``.venv``, and its seed test drives it with ``pytester``. pytest
    loads the plugin before any test; it must be the worktree's, as in the worker's bash."""
    # pytester's temporary directories live in their own root: at its end, a pytest that made
    # any prunes the older numbered directories of its root, and in the shared
    # /tmp/pytest-of-<user> that meant deleting earlier suites' trees for tens of seconds.
    monkeypatch.setenv("PYTEST_DEBUG_TEMPROOT", str(tmp_path / "temproot"))
    (tmp_path / "temproot").mkdir()
    plugin = "import pytest\n\n\n@pytest.fixture\ndef answer():\n    return 42\n"
    source = make_repo(
        tmp_path / "source",
        {".gitignore": ".venv/\n__pycache__/\n", "src/pytest_answer/__init__.py": plugin},
    )
    env = project_venv(source / ".venv")
    editable_install(env, "pytest_answer", source / "src", {}, "answer = pytest_answer")
    worktree, sha = seeded_worktree(
        source, tmp_path / "worktree", {"tests/test_t001_double.py": PLUGIN_TEST}
    )
    settings = Settings(home=tmp_path / "home", sessions_dir=tmp_path / "sessions")
    chosen = resolve_project_env(worktree, source, settings)
    write(worktree, {"src/pytest_answer/__init__.py": plugin + "raise RuntimeError('WIP')\n"})
    run = gate(worktree, sha, chosen)
    assert not run.passed and "src/pytest_answer/__init__.py:7: in <module>" in run.report()
    double = "\n\n@pytest.fixture\ndef double_answer(answer):\n    return 2 * answer\n"
    write(worktree, {"src/pytest_answer/__init__.py": plugin + double})
    run = gate(worktree, sha, chosen)
    assert run.passed, run.report()
    bash = ToolBox(worktree, environment=chosen).dispatch(
        "bash", {"command": "pytest -q -p no:cacheprovider tests/test_t001_double.py"}
    )
    assert "[exit 0]" in bash.result, bash.result


# pytest-cov's interface, as far as a configuration uses it: ``--cov`` measures from the start
# (``pytest_load_initial_conftests``) unless ``--no-cov``, and ``--cov-fail-under`` fails the
# run at its end. (pytest-cov itself is not in this suite's environment; the same project
# with the real plugin behaves alike.)
COVERAGE_PLUGIN = """import pytest


def pytest_addoption(parser):
    group = parser.getgroup('cov')
    group.addoption('--cov', action='append', default=[], dest='cov_source')
    group.addoption('--cov-fail-under', type=float, default=None, dest='cov_fail_under')
    group.addoption('--no-cov', action='store_true', default=False, dest='no_cov')


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    options = early_config.known_args_namespace
    if options.cov_source and not options.no_cov:
        early_config.pluginmanager.register(Measuring(options), '_cov')


class Measuring:
    def __init__(self, options):
        self.options = options

    def pytest_sessionfinish(self, session):
        if self.options.cov_fail_under:
            session.exitstatus = 1  # a handful of tests covers a third of the project
"""


def test_a_configuration_with_a_coverage_threshold(tmp_path: Path) -> None:
    """``addopts = --cov=calc --cov-fail-under=90``: a handful of seed tests never reaches a
    threshold meant for the whole suite; the gate judges whether they pass, not coverage."""
    env = project_venv(tmp_path / "venv")
    (site_dir,) = (tmp_path / "venv").glob("lib/python*/site-packages")
    (site_dir / "pytest_covlike.py").write_text(COVERAGE_PLUGIN)
    info = site_dir / "pytest_covlike-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pytest-covlike\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\npytest_cov = pytest_covlike\n")
    repo, sha = seeded(
        tmp_path / "proj",
        {
            "pyproject.toml": "[tool.pytest.ini_options]\npythonpath = ['src']\n"
            "addopts = '--cov=calc --cov-fail-under=90'\n",
            "src/calc/__init__.py": "",
            "tests/test_t001_add.py": ADD_TEST,
        },
    )
    write(repo, {"src/calc/ops.py": ADD})
    run = gate(repo, sha, env)
    assert run.passed, run.report()


def test_a_seed_test_that_imports_another_tasks_seed_test(tmp_path: Path) -> None:
    """T-002's seed test reuses data from T-001's (``from tests.test_t001_add import
    PAIRS``): the seed commit's copy of T-001's file is beside it, whatever the worktree's."""
    repo, sha = seeded(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\npythonpath = .\n",
            "calc/__init__.py": "",
            "tests/__init__.py": "",
            "tests/test_t001_add.py": "PAIRS = [(2, 3, 5)]\n\n\n" + ADD_TEST,
            "tests/test_t002_sub.py": "from calc.ops import sub\nfrom tests.test_t001_add import "
            "PAIRS\n\n\ndef test_sub():\n    assert [sub(c, b) for _, b, c in PAIRS] == [2]\n",
        },
    )
    write(
        repo,
        {
            "calc/ops.py": ADD + "\n\ndef sub(a, b):\n    return a - b\n",
            "tests/test_t001_add.py": "PAIRS = [(1, 1, 1)]\n",  # not what T-002's gate reads
        },
    )
    run = run_gate(repo, ["T-002"], environment=ENV, timeout=60, seed_sha=sha)
    assert run.passed, run.report()


def test_a_test_command_naming_the_repositorys_virtualenv_with_the_project_installed(
    tmp_path: Path,
) -> None:
    """The README's ``TILTH_TEST_COMMAND='~/code/myrepo/.venv/bin/python -m pytest -q
    {files}'`` on a src layout installed editable in that ``.venv``: the command must import
    the worktree's ``src``, not the repository's, as the virtualenv's own kinds do."""
    source = make_repo(
        tmp_path / "source",
        {".gitignore": ".venv/\n__pycache__/\n", "src/calc/__init__.py": ""},
    )
    env = project_venv(source / ".venv")
    editable_install(env, "calc", source / "src", {})
    worktree, sha = seeded_worktree(
        source, tmp_path / "worktree", {"tests/test_t001_add.py": ADD_TEST}
    )
    write(worktree, {"src/calc/ops.py": ADD})
    settings = Settings(
        home=tmp_path / "home",
        sessions_dir=tmp_path / "sessions",
        test_command=f"{source}/.venv/bin/python -m pytest -q {{files}}",
    )
    chosen = resolve_project_env(worktree, source, settings)
    assert chosen.kind == "command" and chosen.pythonpath == (worktree / "src",), chosen
    run = gate(worktree, sha, chosen)
    assert run.passed, run.report()


def test_a_pytest_plugin_project_installed_editable_in_a_worktree_venv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plugin project again, installed editable in a virtualenv made in the worktree (a
    ``TILTH_SETUP_COMMAND``): its ``.pth`` names the worktree's ``src/`` from start-up, and
    the gate still loads the plugin from there."""
    monkeypatch.setenv("PYTEST_DEBUG_TEMPROOT", str(tmp_path / "temproot"))
    (tmp_path / "temproot").mkdir()
    plugin = "import pytest\n\n\n@pytest.fixture\ndef answer():\n    return 42\n"
    repo, sha = seeded(
        tmp_path / "proj",
        {
            ".gitignore": ".venv/\n__pycache__/\n",
            "src/pytest_answer/__init__.py": plugin,
            "tests/test_t001_double.py": PLUGIN_TEST,
        },
    )
    env = project_venv(repo / ".venv")
    editable_install(env, "pytest_answer", repo / "src", {}, "answer = pytest_answer")
    env = ProjectEnv("worktree-venv", "test", venv=env.venv, bin_dir=env.bin_dir, python=env.python)
    run = gate(repo, sha, env)
    assert not run.passed, run.report()
    double = "\n\n@pytest.fixture\ndef double_answer(answer):\n    return 2 * answer\n"
    write(repo, {"src/pytest_answer/__init__.py": plugin + double})
    run = gate(repo, sha, env)
    assert run.passed, run.report()
