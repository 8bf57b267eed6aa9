"""Code that floods its output cannot take Tilth down: the gate keeps only both ends.

The worker's code runs in the gate (the seed tests import it) and can write gigabytes
within the timeout; the gate held all of it in memory, several times over.
"""

from __future__ import annotations

import shutil
import time
import tracemalloc
from pathlib import Path

from tests.conftest import git, make_repo
from tilth import proc
from tilth.agent.gate.seed_tests import run_gate
from tilth.environment.project import ProjectEnv

PYTHON = Path(shutil.which("python3") or "python3")
ENV = ProjectEnv("python", "python3 on PATH", bin_dir=PYTHON.parent, python=PYTHON)
MEGABYTES = 200
FLOOD = (
    "import atexit, os\n\n\ndef spew():\n"  # after pytest gave the terminal back
    f"    for _ in range({MEGABYTES}):\n        os.write(1, b'x' * 1_000_000)\n\n\n"
    "atexit.register(spew)\n\n\ndef count_words(text):\n    return 0\n"
)
TEST = (
    "from textkit.words import count_words\n\n\n"
    "def test_counts():\n    assert count_words('a') == 1\n"
)


def test_a_flooding_gate_is_read_in_bounded_memory(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"textkit/__init__.py": "", "tests/test_t001_w.py": TEST})
    sha = git(repo, "rev-parse", "HEAD").strip()
    (repo / "textkit" / "words.py").write_text(FLOOD)
    tracemalloc.start()
    try:
        gate = run_gate(repo, ["T-001"], environment=ENV, timeout=120, seed_sha=sha)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not gate.passed
    assert peak < 20_000_000, f"peak {peak} bytes for {MEGABYTES} MB of output"
    assert "truncated" in gate.checks[0].output or len(gate.checks[0].output) < 10_000


def test_run_capped_keeps_both_ends(tmp_path: Path) -> None:
    script = "printf 'HEAD'; head -c 3000000 /dev/zero | tr '\\0' y; printf 'TAIL'; echo err >&2"
    result = proc.run_capped(["/bin/sh", "-c", script], cwd=tmp_path, timeout=30, keep=1000)
    assert result.returncode == 0 and not result.timed_out
    assert result.stdout.startswith("HEAD") and result.stdout.endswith("TAIL")
    assert "[truncated: 3000008 bytes in all]" in result.stdout and len(result.stdout) < 2100
    assert result.stderr == "err\n"


def test_run_capped_times_out_and_kills_the_group(tmp_path: Path) -> None:
    marker = tmp_path / "late"
    script = f"(sleep 2; touch {marker}) & sleep 30"
    result = proc.run_capped(["/bin/sh", "-c", script], cwd=tmp_path, timeout=0.5)
    assert result.timed_out and result.returncode == -9
    time.sleep(2.5)
    assert not marker.exists()
