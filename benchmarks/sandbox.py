"""The cost of the worker's sandbox: one ``bash -c true`` per backend against a bare one.

Run: ``python benchmarks/sandbox.py [--runs 60]`` (or ``TILTH_BENCH_RUNS``).

Each round starts ``bash -c true`` the way the ``bash`` tool does (``proc.run_into``,
output to a file), calls ``GAP_SECONDS`` apart (a model turn at least separates two tool
calls; the launcher for the next call starts in that time), in turn: bare (no sandbox,
no launcher: how an unsandboxed call started before the launcher existed), ``off`` (the
launcher alone: a subreaper that ends what the call left), Landlock (launcher + ruleset
planned for the call + confinement + private ``TMPDIR``) and bubblewrap (its argv, under
the launcher). Rounds interleave the
four so a busy machine slows all of them alike; the process first imports what a run
imports, since forking a bigger process costs more.

Goal: Landlock's median ≤ 5 ms over bare. Bubblewrap's figure is printed beside it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import tilth.model
import tilth.runner  # noqa: F401
from tilth import proc
from tilth.tools import sandbox_landlock
from tilth.tools.launcher import CONTAINED
from tilth.tools.sandbox import Sandbox, make_sandbox, probe

GOAL_MS = 5.0
GAP_SECONDS = 0.3
ARGV = ["/bin/bash", "-c", "true"]


def _timed(start: Callable[[], None], runs: list[float]) -> None:
    time.sleep(GAP_SECONDS)
    began = time.perf_counter()
    start()
    runs.append((time.perf_counter() - began) * 1000)


def _confined(run: Callable[[list[str], proc.Launch | None], None], box: Sandbox) -> None:
    run(box.wrap(ARGV), box.launcher())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=int(os.environ.get("TILTH_BENCH_RUNS", 40)))
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tilth-bench-sandbox-")).resolve()
    landlock = sandbox_landlock.probe()[0]
    bwrap = probe()[0]
    readable = [Path(sys.prefix), Path(sys.base_prefix)]
    boxes = {
        "landlock": make_sandbox(work, readable=readable, backend="landlock") if landlock else None,
        "bwrap": make_sandbox(work, readable=readable) if bwrap else None,
    }
    times: dict[str, list[float]] = {"bare": [], "off": [], "landlock": [], "bwrap": []}
    with tempfile.TemporaryFile() as out:

        def run(argv: list[str], launch: proc.Launch | None) -> None:
            code, _ = proc.run_into(
                argv, stdout=out, stderr=subprocess.STDOUT, cwd=work, launch=launch
            )
            if code != 0:
                out.seek(0)
                raise SystemExit(f"bash -c true failed ({code}): {out.read()[-500:]!r}")

        for _ in range(args.runs):
            _timed(lambda: run(ARGV, None), times["bare"])
            _timed(lambda: run(ARGV, CONTAINED), times["off"])
            for name, box in boxes.items():
                if box is not None:
                    # the launcher (and Landlock's rules) are made per call, as the tool does
                    _timed(partial(_confined, run, box), times[name])
    bare = statistics.median(times["bare"])
    print(f"one `bash -c true`, {args.runs} runs each, interleaved (median / min, ms):")
    for name, runs in times.items():
        if not runs:
            print(f"  {name:9} unavailable here")
            continue
        median = statistics.median(runs)
        over = "" if name == "bare" else f"  (+{median - bare:.1f} over bare)"
        print(f"  {name:9} {median:7.1f} / {min(runs):6.1f}{over}")
    if not times["landlock"]:
        print("Landlock is unavailable here: goal not measured")
        return 1
    extra = statistics.median(times["landlock"]) - bare
    verdict = "within" if extra <= GOAL_MS else "OVER"
    print(f"goal: Landlock ≤ {GOAL_MS:g} ms over bare — {verdict} (+{extra:.1f} ms)")
    return 0 if extra <= GOAL_MS else 1


if __name__ == "__main__":
    sys.exit(main())
