"""While the seed-test gate runs, the progress sink hears what it runs and how it ended."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

from tests.agent.test_pipeline_kit import BAD_ADD, GOOD_ADD, accept, build, case, plan, write
from tests.agent.test_stages import ENV, project
from tilth.agent.gate.outcome import gate_outcome
from tilth.agent.gate.seed_tests import run_gate
from tilth.agent.pipeline import run_task
from tilth.agent.progress_sinks import ProgressLog
from tilth.ui.io import IO
from tilth.ui.progress import TerminalProgress

FAILING_FIRST = [
    plan(),
    write("calc.py", BAD_ADD),
    case(),
    write("calc.py", GOOD_ADD),
    case(),
]


def test_a_library_sink_hears_each_gate_start_and_its_outcome(tmp_path: Path) -> None:
    kit = build(tmp_path, FAILING_FIRST, [accept()])
    progress = ProgressLog()
    ctx = dataclasses.replace(kit.ctx, progress=progress)
    assert run_task(ctx, kit.task()).status == "done"
    gate_notes = [n for n in progress.notes if "seed tests" in n or "verifying T" in n]
    assert gate_notes == [
        "  running the seed tests for T-001 …",
        "  seed tests for T-001: failed 1",
        "  running the seed tests for T-001 …",
        "  seed tests for T-001: passed (1 test)",
        "  verifying T-001: running the seed tests of T-001 …",
        "  verifying T-001: passed (1 test)",
    ]


def test_the_terminal_says_the_gate_is_running_before_it_finishes(tmp_path: Path) -> None:
    kit = build(tmp_path, [plan(), write("calc.py", GOOD_ADD), case()], [accept()])
    buffer = io.StringIO()
    with TerminalProgress(IO(stdout=buffer), live=False) as progress:
        run_task(dataclasses.replace(kit.ctx, progress=progress), kit.task())
    lines = buffer.getvalue().splitlines()
    start = lines.index("  running the seed tests for T-001 …")
    assert lines[start + 1] == "  seed tests for T-001: passed (1 test)"
    assert lines.index("  verifying T-001: passed (1 test)") > start


def test_the_outcome_counts_failures_and_errors_and_names_the_linter(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "test_t001_mixed.py": (
                "import pytest\n\n\n@pytest.fixture\ndef broken():\n    raise RuntimeError\n\n\n"
                "def test_ok():\n    pass\n\n\ndef test_uses(broken):\n    pass\n\n\n"
                "def test_bad():\n    assert 1 == 2\n"
            ),
            "test_t002_fine.py": "def test_a():\n    pass\n\n\ndef test_b():\n    pass\n",
        },
    )
    mixed = run_gate(root, ["T-001"], environment=ENV, timeout=60)
    # pytest stops at the first failure (-x): one error, nothing after it ran
    assert gate_outcome(mixed) == "failed 1 (1 error, 1 passed)"
    linted = run_gate(root, ["T-002"], environment=ENV, timeout=60, lint_command="exit 1")
    assert gate_outcome(linted) == "tests passed (2 tests), lint failed"


def test_a_timed_out_gate_says_so(tmp_path: Path) -> None:
    root = project(
        tmp_path, {"test_t001_slow.py": "import time\n\ndef test_slow():\n    time.sleep(30)\n"}
    )
    gate = run_gate(root, ["T-001"], environment=ENV, timeout=1.5)
    assert gate_outcome(gate) == "failed: timed out after 2s"
