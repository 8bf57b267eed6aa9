"""Cold start of ``tilth --help`` against a bare ``python -c pass``, in the same run.

The goal is a ratio under 8x: ``--help`` should import only click and ``tilth.cli``. Also
timed: importing the model client, what every command that talks to a model pays on top
(``tilth run``, ``chat``, ``serve``...); it must not bring the official SDK or pydantic.
Run it alone with ``python benchmarks/cold_start.py [RUNS]`` or through ``make bench``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

GOAL_RATIO = 8.0
DEFAULT_RUNS = 21
# Anything here on the --help path means a verb or a heavy library was imported eagerly.
MUST_NOT_IMPORT = (
    "rich",
    "openai",
    "httpx",
    "prompt_toolkit",
    "dotenv",
    "filelock",
    "tilth.session",
)

# Anything here on the model client's path means the SDK (1.5 CPU s to import) came back.
CLIENT_MUST_NOT_IMPORT = ("openai", "pydantic", "httpx2")
CLIENT_IMPORT = "import tilth.model.openai_client"

PROBE = """
import json, sys
from tilth.cli import main
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["--help"])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def tilth_command() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m tilth``."""
    script = Path(sys.executable).with_name("tilth")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    found = shutil.which("tilth")
    return [found] if found else [sys.executable, "-m", "tilth"]


def median_seconds(cmd: list[str], runs: int) -> float:
    """Median wall time of ``runs`` fresh processes running ``cmd`` (after one warm-up)."""
    subprocess.run(cmd, check=True, capture_output=True)  # warm the file cache and .pyc files
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def eager_imports() -> list[str]:
    """Modules from ``MUST_NOT_IMPORT`` that ``tilth --help`` loads."""
    probe = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    )
    modules = json.loads(probe.stderr.strip().splitlines()[-1])["modules"]
    return _matching(modules, MUST_NOT_IMPORT)


def client_imports() -> list[str]:
    """Modules from ``CLIENT_MUST_NOT_IMPORT`` that importing the model client loads."""
    code = f"{CLIENT_IMPORT}; import json, sys; print(json.dumps(sorted(sys.modules)))"
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return _matching(json.loads(probe.stdout.strip().splitlines()[-1]), CLIENT_MUST_NOT_IMPORT)


def _matching(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == bad or m.startswith(bad + ".") for bad in names))


def main(runs: int | None = None) -> int:
    """Print both medians and their ratio; returns 1 when over budget."""
    runs = runs or int(os.environ.get("TILTH_BENCH_RUNS", DEFAULT_RUNS))
    command = tilth_command()
    baseline = median_seconds([sys.executable, "-c", "pass"], runs)
    help_time = median_seconds([*command, "--help"], runs)
    client_time = median_seconds([sys.executable, "-c", CLIENT_IMPORT], runs)
    ratio = help_time / baseline
    label = " ".join(Path(c).name for c in command) + " --help"
    verdict = "ok" if ratio < GOAL_RATIO else "OVER BUDGET"
    print(f"cold start, median of {runs} runs")
    print(f"  {'python -c pass':<24}{baseline * 1000:8.1f} ms")
    print(f"  {label:<24}{help_time * 1000:8.1f} ms")
    print(f"  {'ratio':<24}{ratio:8.2f}x   (goal < {GOAL_RATIO:.0f}x: {verdict})")
    print(f"  {'import the model client':<24}{client_time * 1000:8.1f} ms")
    eager = eager_imports()
    if eager:
        print(f"  --help imports what it should not: {', '.join(eager)}")
    else:
        print("  --help imports no verb module and no heavy library")
    heavy = client_imports()
    if heavy:
        print(f"  the model client imports what it should not: {', '.join(heavy[:5])}")
    else:
        print("  the model client imports neither the SDK nor pydantic")
    return 0 if ratio < GOAL_RATIO and not eager and not heavy else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else None))
