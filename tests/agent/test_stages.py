"""The seed-test gate: which files run, with which interpreter, and how it reports."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import git, make_repo
from tilth.agent.gate.seed_copies import seed_test_files
from tilth.agent.gate.seed_tests import child_env, clip, run_gate
from tilth.agent.pipeline import next_stage
from tilth.agent.stages import SENDS_BACK_TO
from tilth.environment.project import ProjectEnv
from tilth.session.pipelines import stage_commit_message

# The tests' project interpreter (first python3 on PATH; see tests/conftest.py).
PYTHON = Path(shutil.which("python3") or "python3")
ENV = ProjectEnv("python", "python3 on PATH", bin_dir=PYTHON.parent, python=PYTHON)

FAST_INI = "[pytest]\naddopts = -p no:hypothesispytest -p no:timeout -p no:anyio\n"


def project(tmp_path: Path, tests: dict[str, str]) -> Path:
    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "pytest.ini").write_text(FAST_INI)
    for name, body in tests.items():
        (root / "tests" / name).write_text(body)
    return root


def test_seed_test_files_match_task_ids_exactly(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "test_t001_add.py": "",
            "test_t0010_other.py": "",
            "test_t002_sub.py": "",
            "test_helpers.py": "",
            "test_t003_Bad.py": "",
        },
    )
    assert seed_test_files(root, ["T-001"]) == ["tests/test_t001_add.py"]
    assert seed_test_files(root, ["T-002", "T-001"]) == [
        "tests/test_t001_add.py",
        "tests/test_t002_sub.py",
    ]
    assert seed_test_files(root, ["T-0010"]) == ["tests/test_t0010_other.py"]
    assert seed_test_files(tmp_path / "missing", ["T-001"]) == []


def test_the_gate_runs_the_environments_own_test_command(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {"test_t001_env.py": "def test_env():\n    pass\n"},
    )
    marker = ProjectEnv("command", "echo", command="echo RAN {files} && exit 0")
    gate = run_gate(root, ["T-001"], environment=marker, timeout=60)
    assert gate.passed and gate.checks[0].output == "RAN tests/test_t001_env.py"
    assert gate.checks[0].command == "echo RAN tests/test_t001_env.py && exit 0"
    missing = ProjectEnv("command", "x", command="false")
    assert not run_gate(root, ["T-001"], environment=missing, timeout=60).passed


def test_gate_runs_pytest_and_reports_failures(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "test_t001_ok.py": "def test_ok():\n    assert True\n",
            "test_t002_bad.py": "def test_bad():\n    assert 1 == 2, 'BAD-MARKER'\n",
        },
    )
    passed = run_gate(root, ["T-001"], environment=ENV, timeout=60)
    assert passed.passed and passed.files == ["tests/test_t001_ok.py"]
    failed = run_gate(
        root, ["T-001", "T-002"], environment=ENV, timeout=60, lint_command="echo linted"
    )
    assert not failed.passed
    assert [c.name for c in failed.checks] == ["pytest", "lint"]
    assert failed.checks[1].passed and "linted" in failed.checks[1].output
    report = failed.report()
    assert "[pytest] FAIL" in report and "BAD-MARKER" in report and "[lint] PASS" in report
    assert not (root / ".pytest_cache").exists()
    assert not list(root.rglob("__pycache__"))


def test_gate_with_no_matching_tests_fails_closed_and_says_so(tmp_path: Path) -> None:
    gate = run_gate(project(tmp_path, {}), ["T-009"], environment=ENV, timeout=60)
    assert not gate.passed and "no seed test of T-009" in gate.checks[0].output


def test_gate_times_out(tmp_path: Path) -> None:
    root = project(
        tmp_path, {"test_t001_slow.py": "import time\n\ndef test_slow():\n    time.sleep(30)\n"}
    )
    gate = run_gate(root, ["T-001"], environment=ENV, timeout=1.5)
    assert not gate.passed and "timed out" in gate.checks[0].output


def test_tests_do_not_see_api_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-xyz-123456")
    monkeypatch.setenv("TILTH_BASE_URL", "http://x")
    monkeypatch.setenv("OTHER", "sk-secret-value")
    env = child_env(["sk-secret-value"])
    assert "OPENAI_API_KEY" not in env and "TILTH_BASE_URL" not in env and "OTHER" not in env
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env.get("PATH") == os.environ.get("PATH")


def test_clip_marks_truncation() -> None:
    assert clip("abc", 10) == "abc"
    assert clip("x" * 20, 5) == "xxxxx\n... [truncated, total 20 chars]"


def test_stage_order_and_send_back_targets() -> None:
    stages = ("planning", "implementing", "code_review", "verifying")
    assert next_stage(stages, []) == "planning"
    assert next_stage(stages, ["planning", "implementing"]) == "code_review"
    assert next_stage(stages, list(stages)) is None
    assert SENDS_BACK_TO == {"design_review": "brainstorming", "code_review": "implementing"}
    assert stage_commit_message("T-007", "planning") == "task/T-007: complete planning stage"


def test_gate_output_hides_the_absolute_workspace_path(tmp_path: Path) -> None:
    root = project(tmp_path, {"test_t001_ok.py": "def test_ok():\n    pass\n"})
    gate = run_gate(
        root, ["T-001"], environment=ENV, timeout=60, lint_command="pwd; echo $PWD/src/x.py; exit 1"
    )
    lint = gate.checks[1].output
    assert str(root) not in lint
    assert lint.splitlines() == [".", "src/x.py"]


SRC_LAYOUT_CONFIGS = {
    "pyproject": ("pyproject.toml", "[tool.pytest.ini_options]\npythonpath = ['src']\n"),
    "pyproject-native": ("pyproject.toml", "[tool.pytest]\npythonpath = ['src']\n"),
    "pytest.toml": ("pytest.toml", "[pytest]\npythonpath = ['src']\n"),
    "pytest.ini": ("pytest.ini", "[pytest]\npythonpath = src\n"),
    "setup.cfg": ("setup.cfg", "[tool:pytest]\npythonpath = src\n"),
}


@pytest.mark.parametrize("config", sorted(SRC_LAYOUT_CONFIGS))
def test_the_seed_gate_keeps_the_projects_pythonpath(tmp_path: Path, config: str) -> None:
    """A src-layout project whose pytest config puts ``src`` on the path passes the gate with
    the seed commit's copies, as its tests pass when run in the worktree."""
    name, text = SRC_LAYOUT_CONFIGS[config]
    root = make_repo(
        tmp_path / "my project",
        {
            name: text,
            "src/pkg/__init__.py": "",
            "tests/test_t001_value.py": "from pkg.value import VALUE\n\n\n"
            "def test_value():\n    assert VALUE == 1\n",
        },
    )
    seed = git(root, "rev-parse", "HEAD").strip()
    (root / "src" / "pkg" / "value.py").write_text("VALUE = 1\n")
    gate = run_gate(root, ["T-001"], environment=ENV, timeout=60, seed_sha=seed)
    assert gate.passed, gate.report()
    # TILTH_TEST_COMMAND (the README's way to name the project's interpreter) too.
    command = ProjectEnv("command", "x", command=f"{PYTHON} -m pytest -q -p no:cacheprovider")
    gate = run_gate(root, ["T-001"], environment=command, timeout=60, seed_sha=seed)
    assert gate.passed, gate.report()


HELPER_LAYOUTS = {
    "module": ({}, "from helpers import words"),
    "package": ({"tests/__init__.py": ""}, "from tests.helpers import words"),
}


@pytest.mark.parametrize("layout", sorted(HELPER_LAYOUTS))
def test_the_seed_gate_sees_the_test_helpers_beside_the_seed_tests(
    tmp_path: Path, layout: str
) -> None:
    """Seed tests that import a helper of the project's tests/ (or read its data files), as
    they do when run in the worktree, pass the gate; a conftest.py the worker adds is not
    picked up, since only the seed commit's conftest counts."""
    extra, import_line = HELPER_LAYOUTS[layout]
    root = make_repo(
        tmp_path / "proj",
        {
            "pytest.ini": FAST_INI,
            **extra,
            "tests/helpers.py": "from pathlib import Path\n\n\ndef words():\n"
            "    return (Path(__file__).parent / 'data' / 'words.txt').read_text().split()\n",
            "tests/data/words.txt": "a b\n",
            "tests/test_t001_words.py": f"{import_line}\n\n\n"
            "def test_words():\n    assert words() == ['a', 'b']\n",
        },
    )
    seed = git(root, "rev-parse", "HEAD").strip()
    (root / "tests" / "conftest.py").write_text("raise SystemExit('worker conftest loaded')\n")
    gate = run_gate(root, ["T-001"], environment=ENV, timeout=60, seed_sha=seed)
    assert gate.passed, gate.report()
