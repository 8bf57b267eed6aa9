"""Run every ``benchmarks/*.py`` that defines a top-level ``main()`` and print its output.

Each benchmark runs in its own interpreter so one cannot warm another's imports.
A benchmark fails when it raises or when ``main()`` returns a non-zero int; the
exit code is 1 if any failed. ``make bench`` runs this file.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Loads the file under a name other than __main__ (so its own CLI block stays quiet),
# calls main() with an empty command line and turns its return value into the exit code.
RUNNER = """
import runpy, sys
path = sys.argv[1]
sys.argv = [path]  # main() may parse its own options: give it none
namespace = runpy.run_path(path, run_name="benchmark")
result = namespace["main"]()
sys.exit(result if isinstance(result, int) else 0)
"""


def defines_main(path: Path) -> bool:
    """True when ``path`` has a top-level ``def main`` (checked without importing it)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, OSError):
        return False
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "main"
        for node in tree.body
    )


def benchmarks(directory: Path = HERE) -> list[Path]:
    """The benchmark files in ``directory``, sorted by name, this runner excluded."""
    return [
        p
        for p in sorted(directory.glob("*.py"))
        if p.name != Path(__file__).name and not p.name.startswith("_") and defines_main(p)
    ]


def run_one(path: Path) -> bool:
    """Run one benchmark with its output passed straight through; True when it passed."""
    print(f"== {path.stem} ==", flush=True)
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", RUNNER, str(path)], cwd=HERE.parent)
    elapsed = time.perf_counter() - start
    status = "ok" if result.returncode == 0 else f"FAILED (exit {result.returncode})"
    print(f"-- {path.stem}: {status} in {elapsed:.1f}s\n", flush=True)
    return result.returncode == 0


def main() -> int:
    """Run them all; returns 1 when any failed."""
    found = benchmarks()
    if not found:
        print("no benchmarks found")
        return 0
    failed = [p.stem for p in found if not run_one(p)]
    print(f"{len(found) - len(failed)}/{len(found)} benchmarks passed", end="")
    print(f"; failed: {', '.join(failed)}" if failed else "")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
