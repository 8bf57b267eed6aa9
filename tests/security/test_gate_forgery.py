"""Ways a worker could make the seed-test gate pass without doing the work: none does now.

Each attack leaves a wrong (or no) implementation plus the trick in the worktree; the gate
runs the seed commit's copies, as in a run. The tricks that hide from the evaluator's diff
(a gitignored ``pytest.py``, plugin metadata, stale bytecode) matter most.
"""

from __future__ import annotations

import importlib.util
import marshal
import py_compile
import shutil
import site
import sys
import venv
from pathlib import Path

import pytest
from _pytest.assertion import rewrite

from security.conftest import BACKENDS, require_sandbox
from tests.conftest import git, make_repo
from tilth.agent.gate.seed_tests import run_gate
from tilth.environment.project import ProjectEnv
from tilth.tools.sandbox import make_sandbox

SEED_TEST = (
    "from textkit.words import count_words\n\n\n"
    "def test_counts():\n    assert count_words('a b') == 2\n"
)
WRONG = "def count_words(text):\n    return 0\n"
RIGHT = "def count_words(text):\n    return len(text.split())\n"
FAST_INI = "[pytest]\naddopts = -p no:hypothesispytest -p no:anyio\n"
PLUGIN = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    report = outcome.get_result()\n"
    "    report.outcome, report.longrepr = 'passed', None\n"
)

ATTACKS: dict[str, dict[str, str]] = {
    # `python -m pytest` in the worktree would import this instead of pytest.
    "a pytest.py shadowing pytest": {
        "pytest.py": "import sys\nprint('1 passed')\nsys.exit(0)\n",
        "textkit/words.py": WRONG,
    },
    "os._exit(0) when the tests import the code": {"textkit/words.py": "import os\nos._exit(0)\n"},
    "an atexit hook turning a failure into status 0": {
        "textkit/words.py": "import atexit, os\natexit.register(os._exit, 0)\n" + WRONG
    },
    "the code skips the test that calls it": {
        "textkit/words.py": "import pytest\n\n\ndef count_words(text):\n    pytest.skip('later')\n"
    },
    "the code xfails the test that calls it": {
        "textkit/words.py": "import pytest\n\n\ndef count_words(text):\n    pytest.xfail('later')\n"
    },
    "pytest.exit with status 0 at import": {
        "textkit/words.py": "import pytest\npytest.exit('done', returncode=0)\n"
    },
}


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> ProjectEnv:
    """A project interpreter with pytest whose plugin autoloading is on (as a user's is)."""
    root = tmp_path_factory.mktemp("python") / "env"
    venv.EnvBuilder(with_pip=False).create(root)
    (site_dir,) = root.glob("lib/python*/site-packages")
    (site_dir / "tilth-test.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return ProjectEnv("python", "test env", bin_dir=root / "bin", python=root / "bin" / "python")


def _worktree(tmp_path: Path, files: dict[str, str]) -> tuple[Path, str]:
    """A repository whose seed commit holds the T-001 test; ``files`` written after it."""
    repo = make_repo(
        tmp_path / "repo",
        {
            "textkit/__init__.py": "",
            "tests/test_t001_count_words.py": SEED_TEST,
            ".gitignore": "__pycache__/\n*.pyc\n",
            "pytest.ini": FAST_INI,
        },
    )
    sha = git(repo, "rev-parse", "HEAD").strip()
    for name, content in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(content)
    return repo, sha


def _gate(repo: Path, sha: str, env: ProjectEnv, *, sandboxed: bool = False) -> tuple[bool, str]:
    sandbox = None
    if sandboxed:
        require_sandbox()
        readable = [*env.readable_paths(), Path(sys.prefix), Path(sys.base_prefix)]
        sandbox = make_sandbox(repo, readable=readable, backend=BACKENDS[0])
    gate = run_gate(repo, ["T-001"], environment=env, timeout=60, seed_sha=sha, sandbox=sandbox)
    return gate.passed, gate.report()


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_trick_in_the_code_does_not_pass_the_gate(
    tmp_path: Path, python: ProjectEnv, attack: str
) -> None:
    repo, sha = _worktree(tmp_path, ATTACKS[attack])
    passed, report = _gate(repo, sha, python)
    assert not passed, report
    assert "[pytest] FAIL" in report


def test_a_skipped_seed_test_is_named_in_the_report(tmp_path: Path, python: ProjectEnv) -> None:
    repo, sha = _worktree(tmp_path, ATTACKS["the code skips the test that calls it"])
    _, report = _gate(repo, sha, python)
    assert "skipped: tests/test_t001_count_words.py::test_counts (Skipped: later)" in report
    assert "A skipped or xfailed seed test proves nothing" in report
    assert str(tmp_path) not in report


def test_an_early_exit_is_explained(tmp_path: Path, python: ProjectEnv) -> None:
    repo, sha = _worktree(tmp_path, ATTACKS["os._exit(0) when the tests import the code"])
    _, report = _gate(repo, sha, python)
    assert "exited with status 0 before pytest finished" in report


def test_a_hidden_plugin_in_the_worktree_is_not_loaded(tmp_path: Path, python: ProjectEnv) -> None:
    """Plugin metadata in the worktree (ignored by git, so not in the diff) that rewrites
    every failure as a pass: pytest loads plugins before the worktree is importable."""
    info = "evil-1.0.dist-info"
    repo, sha = _worktree(
        tmp_path,
        {
            "textkit/words.py": WRONG,
            f"{info}/METADATA": "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n",
            f"{info}/entry_points.txt": "[pytest11]\nevil = evilplug\n",
            "evilplug.py": PLUGIN,
            ".gitignore": "__pycache__/\n*.pyc\nevilplug.py\nevil-1.0.dist-info/\n",
        },
    )
    assert "evil" not in git(repo, "status", "--porcelain", "--untracked-files=all")
    passed, report = _gate(repo, sha, python)
    assert not passed, report


def test_bytecode_that_differs_from_the_source_is_not_run(
    tmp_path: Path, python: ProjectEnv
) -> None:
    """An unchecked-hash .pyc under __pycache__ (ignored) would run instead of the source."""
    repo, sha = _worktree(tmp_path, {"textkit/words.py": WRONG})
    right = tmp_path / "right.py"
    right.write_text(RIGHT)
    cached = repo / "textkit" / "__pycache__" / f"words.{sys.implementation.cache_tag}.pyc"
    cached.parent.mkdir()
    mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
    py_compile.compile(str(right), cfile=str(cached), invalidation_mode=mode)
    passed, report = _gate(repo, sha, python)
    assert not passed, report
    assert cached.exists()  # the gate neither used nor removed it


def test_bytecode_of_a_linked_test_helper_package_is_not_run(
    tmp_path: Path, python: ProjectEnv
) -> None:
    """A helper package of ``tests/`` reaches the seed tests through a link in the private
    copy; a stale .pyc the worker left in its ``__pycache__`` is not run through it."""
    repo = make_repo(
        tmp_path / "repo",
        {
            "textkit/__init__.py": "",
            "tests/factories/__init__.py": "TEXT = 'a b'\n",
            "tests/test_t001_count_words.py": "from factories import TEXT\n"
            "from textkit.words import count_words\n\n\n"
            "def test_counts():\n    assert count_words(TEXT) == 2\n",
            ".gitignore": "__pycache__/\n*.pyc\n",
            "pytest.ini": FAST_INI,
        },
    )
    sha = git(repo, "rev-parse", "HEAD").strip()
    (repo / "textkit" / "words.py").write_text(
        "def count_words(text):\n    return 2 if text == 'forged' else 0\n"
    )
    forged = tmp_path / "forged.py"
    forged.write_text("TEXT = 'forged'\n")
    tag = sys.implementation.cache_tag
    cached = repo / "tests" / "factories" / "__pycache__" / f"__init__.{tag}.pyc"
    cached.parent.mkdir()
    mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
    py_compile.compile(str(forged), cfile=str(cached), invalidation_mode=mode)
    passed, report = _gate(repo, sha, python)
    assert not passed, report


def test_rewritten_bytecode_of_a_plugin_module_is_not_run(
    tmp_path: Path, python: ProjectEnv
) -> None:
    """pytest rewrites the asserts of the modules a conftest names in ``pytest_plugins`` and
    caches the result beside them (``*-pytest-<version>.pyc``, checked against the source's
    hash only); a forged one the worker left there (ignored) is not run instead."""
    fixture = "import pytest\n\n\n@pytest.fixture\ndef text():\n    return 'a b'\n"
    repo = make_repo(
        tmp_path / "repo",
        {
            "textkit/__init__.py": "",
            "textkit/testing.py": fixture,
            "conftest.py": "pytest_plugins = ['textkit.testing']\n",
            "tests/test_t001_count_words.py": "from textkit.words import count_words\n\n\n"
            "def test_counts(text):\n    assert count_words(text) == 2\n",
            ".gitignore": "__pycache__/\n*.pyc\n",
            "pytest.ini": FAST_INI,
        },
    )
    sha = git(repo, "rev-parse", "HEAD").strip()
    (repo / "textkit" / "words.py").write_text(
        "def count_words(text):\n    return 2 if text == 'forged' else 0\n"
    )
    source = repo / "textkit" / "testing.py"
    forged = compile(fixture.replace("'a b'", "'forged'"), str(source), "exec")
    cached = repo / "textkit" / "__pycache__" / f"testing{rewrite.PYC_TAIL}"
    cached.parent.mkdir()
    header = importlib.util.MAGIC_NUMBER + b"\x03\x00\x00\x00"
    cached.write_bytes(
        header + importlib.util.source_hash(source.read_bytes()) + marshal.dumps(forged)
    )
    passed, report = _gate(repo, sha, python)
    assert not passed, report
    (repo / "textkit" / "words.py").write_text(RIGHT)
    passed, report = _gate(repo, sha, python)
    assert passed, report


@pytest.mark.sandbox_backend  # the gate inside the first backend under test
def test_the_honest_implementation_passes_in_and_out_of_the_sandbox(
    tmp_path: Path, python: ProjectEnv
) -> None:
    repo, sha = _worktree(tmp_path, {"textkit/words.py": RIGHT})
    passed, report = _gate(repo, sha, python)
    assert passed, report
    passed, report = _gate(repo, sha, python, sandboxed=True)
    assert passed, report
    assert not list(repo.rglob("__pycache__"))


@pytest.mark.sandbox_backend  # the gate inside the first backend under test
def test_tricks_fail_in_the_sandbox_too(tmp_path: Path, python: ProjectEnv) -> None:
    repo, sha = _worktree(tmp_path, ATTACKS["a pytest.py shadowing pytest"])
    passed, report = _gate(repo, sha, python, sandboxed=True)
    assert not passed, report
    shutil.rmtree(repo)
    repo, sha = _worktree(tmp_path, ATTACKS["os._exit(0) when the tests import the code"])
    passed, report = _gate(repo, sha, python, sandboxed=True)
    assert not passed and "before pytest finished" in report, report


def test_seed_tests_moved_behind_a_directory_link_count_as_changed(
    tmp_path: Path, python: ProjectEnv
) -> None:
    """``tests`` replaced by a link to a copy: every file reads the same, but the commit
    would hold a link where the seed tests were."""
    repo, sha = _worktree(tmp_path, {"textkit/words.py": RIGHT})
    (repo / "tests").rename(repo / "kept")
    (repo / "tests").symlink_to("kept")
    gate = run_gate(repo, ["T-001"], environment=python, timeout=60, seed_sha=sha)
    assert not gate.passed
    assert gate.tampered == ["tests/test_t001_count_words.py"]


# A pytest.py that forges the launcher's report: it would pass if it were imported instead
# of pytest, which is what a worktree directory on PYTHONPATH at start-up would allow.
FORGED_REPORT = """import json, sys
report, args = sys.argv[1], sys.argv[3:]
keys = [a + '::test_counts' for a in args if a.endswith('.py')]
with open(report, 'w') as out:
    json.dump({'version': 1, 'exit': 0, 'collected': keys,
               'outcomes': {k: 'passed' for k in keys}, 'reasons': {}}, out)
print('1 passed')
"""


def test_a_pythonpath_directory_is_importable_only_once_pytest_has_loaded(
    tmp_path: Path, python: ProjectEnv
) -> None:
    """A src layout (``pythonpath = src``): the seed tests import from ``src/``, but a
    gitignored ``src/pytest.py`` that forges pytest's report is never what ``import
    pytest`` finds; the honest code in ``src/`` still passes."""
    repo = make_repo(
        tmp_path / "repo",
        {
            "src/textkit/__init__.py": "",
            "tests/test_t001_count_words.py": SEED_TEST,
            ".gitignore": "__pycache__/\n*.pyc\nsrc/pytest.py\n",
            "pytest.ini": "[pytest]\npythonpath = src\n"
            "addopts = -p no:hypothesispytest -p no:anyio\n",
        },
    )
    sha = git(repo, "rev-parse", "HEAD").strip()
    (repo / "src" / "textkit" / "words.py").write_text(WRONG)
    (repo / "src" / "pytest.py").write_text(FORGED_REPORT)
    assert "pytest.py" not in git(repo, "status", "--porcelain", "--untracked-files=all")
    passed, report = _gate(repo, sha, python)
    assert not passed, report
    (repo / "src" / "textkit" / "words.py").write_text(RIGHT)
    passed, report = _gate(repo, sha, python)
    assert passed, report


@pytest.mark.parametrize(
    "skip",
    [
        "import pytest\npytest.skip('later', allow_module_level=True)\n",
        "import unittest\nraise unittest.SkipTest('later')\n",
    ],
    ids=["pytest.skip", "unittest.SkipTest"],
)
def test_code_that_skips_a_whole_seed_test_module_does_not_pass(
    tmp_path: Path, python: ProjectEnv, skip: str
) -> None:
    """A task with two seed test files: the code one of them imports skips that module at
    import, so its tests are never collected, while the other file's tests pass."""
    repo, sha = _worktree(
        tmp_path,
        {
            "tests/test_t001_other.py": "from textkit.other import one\n\n\n"
            "def test_one():\n    assert one() == 1\n",
        },
    )
    git(repo, "add", "tests/test_t001_other.py")
    git(repo, "commit", "-q", "-m", "second seed test")
    sha = git(repo, "rev-parse", "HEAD").strip()
    (repo / "textkit" / "other.py").write_text("def one():\n    return 1\n")
    (repo / "textkit" / "words.py").write_text(skip + WRONG)
    passed, report = _gate(repo, sha, python)
    assert not passed, report
    assert "skipped: tests/test_t001_count_words.py" in report
    (repo / "textkit" / "words.py").write_text(RIGHT)
    passed, report = _gate(repo, sha, python)
    assert passed, report


def _worktree_venv(tmp_path: Path) -> tuple[Path, str, ProjectEnv]:
    """A src-layout repository whose ``.venv`` (made in the worktree, as by
    ``TILTH_SETUP_COMMAND`` or ``uv sync``) has the project installed editable: its ``.pth``
    names ``src/`` on ``sys.path`` from interpreter start-up. The wrong code is committed."""
    repo = make_repo(
        tmp_path / "repo",
        {
            "src/textkit/__init__.py": "",
            "tests/test_t001_count_words.py": SEED_TEST,
            ".gitignore": "__pycache__/\n*.py[cod]\n*.egg-info/\n.venv/\n",
            "pytest.ini": FAST_INI,
        },
    )
    sha = git(repo, "rev-parse", "HEAD").strip()
    root = repo / ".venv"
    venv.EnvBuilder(with_pip=False).create(root)
    (site_dir,) = root.glob("lib/python*/site-packages")
    (site_dir / "tilth-test.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    (site_dir / "__editable__.textkit-0.1.pth").write_text(f"{repo / 'src'}\n")
    env = ProjectEnv(
        "worktree-venv", "test", venv=root, bin_dir=root / "bin", python=root / "bin" / "python"
    )
    (repo / "src" / "textkit" / "words.py").write_text(WRONG)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "wrong")
    return repo, sha, env


def test_plugin_metadata_beside_a_worktree_venvs_editable_install_is_not_loaded(
    tmp_path: Path,
) -> None:
    """Plugin metadata the worker hides in the ``src/`` a worktree virtualenv's editable
    install names, under names a usual ``.gitignore`` already ignores (``*.egg-info``,
    ``__pycache__``), is not loaded: no change shows in git."""
    repo, sha, env = _worktree_venv(tmp_path)
    info = repo / "src" / "evil-1.0.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nevil = __pycache__\n")
    (repo / "src" / "__pycache__").mkdir()
    (repo / "src" / "__pycache__" / "__init__.py").write_text(PLUGIN)
    assert not git(repo, "status", "--porcelain", "--untracked-files=all")
    passed, report = _gate(repo, sha, env)
    assert not passed, report
    (repo / "src" / "textkit" / "words.py").write_text(RIGHT)
    passed, report = _gate(repo, sha, env)
    assert passed, report


def test_a_sitecustomize_beside_a_worktree_venvs_editable_install_is_not_run(
    tmp_path: Path,
) -> None:
    """``site`` imports ``sitecustomize`` at start-up from anywhere on ``sys.path``, the
    ``src/`` a worktree virtualenv's ``.pth`` names included; a sourceless
    ``src/sitecustomize.pyc`` (``*.py[cod]`` is ignored) that loads a forging plugin
    through ``PYTEST_PLUGINS`` is not run. The virtualenv's own one still is."""
    repo, sha, env = _worktree_venv(tmp_path)
    assert env.venv is not None
    (site_dir,) = env.venv.glob("lib/python*/site-packages")
    (site_dir / "sitecustomize.py").write_text("import sys\nprint('own site', file=sys.stderr)\n")
    customize = tmp_path / "sitecustomize.py"
    customize.write_text(
        "import os, sys, types\n"
        f"plugin = types.ModuleType('evilplug')\nexec({PLUGIN!r}, plugin.__dict__)\n"
        "sys.modules['evilplug'] = plugin\nos.environ['PYTEST_PLUGINS'] = 'evilplug'\n"
    )
    py_compile.compile(str(customize), cfile=str(repo / "src" / "sitecustomize.pyc"))
    assert not git(repo, "status", "--porcelain", "--untracked-files=all")
    passed, report = _gate(repo, sha, env)
    assert not passed, report
    (repo / "src" / "textkit" / "words.py").write_text(RIGHT)
    passed, report = _gate(repo, sha, env)
    assert passed and "own site" in report, report


def test_a_worktree_venvs_own_packages_keep_their_bytecode_and_the_project_does_not(
    tmp_path: Path,
) -> None:
    """A virtualenv made in the worktree is read-only to the worker, so its packages load
    from their cached bytecode, as everywhere else (compiling every dependency at every
    gate would cost seconds); the project's own modules beside it are still compiled from
    source, whatever bytecode lies next to them."""
    repo, sha, env = _worktree_venv(tmp_path)
    assert env.venv is not None
    (site_dir,) = env.venv.glob("lib/python*/site-packages")
    tag, mode = sys.implementation.cache_tag, py_compile.PycInvalidationMode.UNCHECKED_HASH
    compiled = tmp_path / "compiled.py"
    compiled.write_text("def split(text):\n    return text.split()\n")
    (site_dir / "splitter.py").write_text("def split(text):\n    return []\n")
    cached = site_dir / "__pycache__" / f"splitter.{tag}.pyc"
    py_compile.compile(str(compiled), cfile=str(cached), invalidation_mode=mode)
    uses = "from splitter import split\n\n\ndef count_words(text):\n    return len(split(text))\n"
    (repo / "src" / "textkit" / "words.py").write_text(uses)
    passed, report = _gate(repo, sha, env)
    assert passed, "the environment's cached bytecode was not used:\n" + report

    (repo / "src" / "textkit" / "words.py").write_text(WRONG)
    forged = repo / "src" / "textkit" / "__pycache__" / f"words.{tag}.pyc"
    compiled.write_text(uses)
    py_compile.compile(str(compiled), cfile=str(forged), invalidation_mode=mode)
    passed, report = _gate(repo, sha, env)
    assert not passed, report
