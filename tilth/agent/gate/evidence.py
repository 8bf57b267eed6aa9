"""What proves the seed tests passed: pytest's own report of every test, not an exit code.

The tests import the worker's code, and that code runs in the test process: it can end
the process with status 0 before any test ran (``os._exit(0)`` at import, an ``atexit``
hook), or skip and xfail the tests from inside. The gate therefore runs pytest through
``pytest_runner`` and passes only when its report shows every collected seed test run
and passed.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tilth.safe_read import read_inside

RUNNER = Path(__file__).with_name("pytest_runner.py")
REPORT = "report.json"
REPORT_CAP = 16 << 20
PLAN = "launch.json"
PLUGIN_LINKS = "plugins"
SHOWN = 5
"""Tests named per kind of problem; the rest are counted."""


@contextmanager
def gate_scratch() -> Iterator[Path]:
    """A private directory for one gate run: the launcher, what it is to do, its report."""
    with tempfile.TemporaryDirectory(prefix="tilth-gate-") as tmp:
        root = Path(tmp).resolve()
        shutil.copyfile(RUNNER, root / RUNNER.name)
        yield root


def runner_words(
    scratch: Path,
    imports: Sequence[Path],
    *,
    from_source: Sequence[Path] = (),
    children: Sequence[Path] = (),
    early: Sequence[Path] = (),
) -> list[str]:
    """What follows the interpreter to run pytest through the launcher.

    ``imports``: the worktree directories project code is imported from, first first; the
    launcher puts them on ``sys.path`` only once pytest and its plugins have loaded.
    ``from_source``: further directories whose modules are compiled from their source (the
    private copy of the seed tests, whose links reach into the worktree). ``children``:
    directories put first on ``PYTHONPATH`` once pytest has loaded, for the processes the
    tests start (where an editable install points, as the worker's ``bash`` has them).
    ``early``: directories on ``sys.path`` while pytest loads its plugins (``plugin_links``).
    pytest's cache lives in the scratch directory: a configuration's ``cache_dir`` or
    ``--ff`` works, and nothing is written to the worktree.
    """
    plan = {
        "imports": [str(path) for path in imports],
        "from_source": [str(path) for path in from_source],
        "children": [str(path) for path in children],
        "early": [str(path) for path in early],
        "cache_dir": str(scratch / "pytest-cache"),
    }
    (scratch / PLAN).write_text(json.dumps(plan), encoding="utf-8")
    # -S: the launcher runs ``site`` itself, so that no ``sitecustomize`` in the worktree (an
    # editable install's ``.pth`` can name worktree directories) runs at start-up.
    return ["-S", str(scratch / RUNNER.name), str(scratch / REPORT), str(scratch / PLAN)]


def plugin_links(scratch: Path, worktree: Path, plugins: Sequence[tuple[str, Path]]) -> list[Path]:
    """Directories under ``scratch/plugins`` holding links to the project's own pytest plugins
    (module name, worktree directory) and nothing else, laid out as in the worktree
    (``plugins/src/pytest_x``). pytest imports those plugins while it loads its plugins,
    before the worktree may be importable; from here it finds the worktree's, and no other
    file of the worktree (a module, plugin metadata) is reachable then."""
    homes: list[Path] = []
    for name, where in plugins:
        inside = where.is_relative_to(worktree)
        home = scratch / PLUGIN_LINKS / (where.relative_to(worktree) if inside else where.name)
        home.mkdir(parents=True, exist_ok=True)
        for entry in (where / name, where / f"{name}.py"):
            if entry.exists() and not (home / entry.name).exists():
                (home / entry.name).symlink_to(entry)
        if home not in homes:
            homes.append(home)
    return homes


def _names(tests: list[str], reasons: dict[str, str]) -> str:
    shown = [f"{t} ({reasons[t]})" if reasons.get(t) else t for t in tests[:SHOWN]]
    more = f" and {len(tests) - SHOWN} more" if len(tests) > SHOWN else ""
    return ", ".join(shown) + more


def shortfall(scratch: Path, returncode: int) -> str | None:
    """Why this run does not show every seed test passing; None when it does.

    Only asked when the process exited 0: a failing exit code already says enough.
    """
    try:
        # The tests run the worker's code, which can write (or link) the report.
        report = json.loads(read_inside(scratch, REPORT, REPORT_CAP))
        collected = [str(t) for t in report["collected"]]
        outcomes = {str(k): str(v) for k, v in dict(report["outcomes"]).items()}
        reasons = {str(k): str(v) for k, v in dict(report.get("reasons") or {}).items()}
        exit_code = int(report["exit"])
    except (OSError, ValueError, KeyError, TypeError):
        return (
            f"[gate] FAIL: the test process exited with status {returncode} before pytest "
            "finished, so no seed test is known to have passed. Code the tests import ended "
            "the process early (os._exit, sys.exit or an atexit hook?)."
        )
    if exit_code != 0:
        return f"[gate] FAIL: pytest reported exit status {exit_code}; the process exited 0."
    if not collected:
        return "[gate] FAIL: pytest collected no seed test."
    by_kind: dict[str, list[str]] = {}
    for test in collected:
        kind = outcomes.get(test, "not run")
        if kind != "passed":
            by_kind.setdefault(kind, []).append(test)
    if not by_kind:
        return None
    parts = [f"{kind}: {_names(tests, reasons)}" for kind, tests in sorted(by_kind.items())]
    return (
        "[gate] FAIL: not every seed test passed — "
        + "; ".join(parts)
        + ". A skipped or xfailed seed test proves nothing: make the code pass it."
    )
