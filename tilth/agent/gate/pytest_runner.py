"""The gate's pytest launcher; it runs in the *project's* interpreter, not Tilth's.

Usage: ``python -S pytest_runner.py REPORT PLAN [pytest args...]``; ``PLAN`` is a JSON file:
``imports``, the worktree after the worktree directories a ``pythonpath`` setting or an
editable install names (first first); ``from_source``, further directories whose
modules are never read from cached bytecode (the private copy of the seed tests, whose
links reach into the worktree); ``children``, directories put first on ``PYTHONPATH`` for
the processes the tests start, once pytest has loaded (where an editable install points);
``early``, directories on ``sys.path`` only while pytest loads its plugins (links to the
project's own pytest plugins in the worktree, when the project is a plugin installed
editable, and to nothing else; the launcher adds its own for a virtualenv made in the
worktree, whose editable install names worktree directories on ``sys.path`` at start-up:
those are taken off it until the tests import code); ``cache_dir``, where pytest's cache
goes (private to the run, so a configuration that sets ``cache_dir`` or uses ``--ff`` works
unchanged).

``python -m pytest`` in the worktree would put the worktree first on ``sys.path``
before pytest starts, so files the worker left there (a ``pytest.py``, a
``*.dist-info`` declaring a pytest plugin, a ``__pycache__`` with bytecode that
differs from the source) would decide the result. Here pytest and its installed
plugins load first; the worktree joins ``sys.path`` only before the first
conftest, and modules found in the worktree are always compiled from their source,
never from cached bytecode. (Everything else keeps its cached bytecode: compiling
pytest and a project's dependencies afresh would cost seconds at every gate.)
``REPORT`` then receives what every test did, so the gate need not trust the
exit code alone (a process can ``os._exit(0)`` before any test ran). The tests run in
this process even when a configuration asks pytest-xdist for workers (``-n auto``), and
without pytest-cov's coverage (a threshold for the whole suite fails a few tests).

Standard library and pytest only, and syntax every supported Python reads.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

REPORT_VERSION = 1


class Recorder:
    """A pytest plugin object noting each test's outcome, by file and name.

    (Node ids alone are not enough: for a test file outside the rootdir pytest leaves the
    file out of them.)
    """

    def __init__(self) -> None:
        self.collected: list[str] = []
        self.outcomes: dict[str, str] = {}
        self.reasons: dict[str, str] = {}
        self.current = ""
        self.collectors: dict[str, str] = {}  # node id → key, of each collector started
        self.skipped: list[str] = []  # collectors skipped whole (a module-level skip)

    def pytest_collectstart(self, collector: object) -> None:
        nodeid = str(getattr(collector, "nodeid", ""))
        path = getattr(collector, "path", None) or getattr(collector, "fspath", "")
        rest = nodeid.split("::", 1)[1] if "::" in nodeid else ""
        self.collectors[nodeid] = f"{path}::{rest}" if rest else str(path)

    def pytest_collectreport(self, report: object) -> None:
        # Code a test module imports can skip the whole module (``pytest.skip(...,
        # allow_module_level=True)``, ``unittest.SkipTest``): its tests are never items.
        if str(getattr(report, "outcome", "")) != "skipped":
            return
        key = self.collectors.get(str(getattr(report, "nodeid", "")), "")
        if key and key not in self.skipped:
            self.skipped.append(key)
            self.outcomes[key] = "skipped"
            self.reasons[key] = _reason(report)

    def pytest_collection_finish(self, session: object) -> None:
        self.collected = [_key(item) for item in getattr(session, "items", [])] + self.skipped

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.current = ""

    def pytest_runtest_setup(self, item: object) -> None:
        self.current = _key(item)

    def pytest_runtest_logreport(self, report: object) -> None:
        test = self.current
        if not test:
            return
        when = getattr(report, "when", "")
        outcome = str(getattr(report, "outcome", ""))
        xfail = hasattr(report, "wasxfail")
        if outcome == "failed":
            self.outcomes[test] = "failed"
        elif outcome == "skipped":
            if self.outcomes.get(test) != "failed":
                self.outcomes[test] = "xfailed" if xfail else "skipped"
                self.reasons[test] = _reason(report)
        elif when == "call" and test not in self.outcomes:
            self.outcomes[test] = "xpassed" if xfail else "passed"

    def dump(self, path: str, exit_code: int) -> None:
        report = {
            "version": REPORT_VERSION,
            "exit": exit_code,
            "collected": self.collected,
            "outcomes": self.outcomes,
            "reasons": self.reasons,
        }
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(report, handle)


def _key(item: object) -> str:
    path = getattr(item, "path", None) or getattr(item, "fspath", "")
    return f"{path}::{str(getattr(item, 'nodeid', '')).split('::', 1)[-1]}"


def _reason(report: object) -> str:
    wasxfail = getattr(report, "wasxfail", None)
    if wasxfail:
        return str(wasxfail)
    longrepr = getattr(report, "longrepr", None)
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr or "")


def _inside(path: str, roots: list[str]) -> bool:
    real = os.path.realpath(path or os.curdir)
    return any(real == root or real.startswith(root + os.sep) for root in roots)


def _virtualenv_in(roots: list[str]) -> list[str]:
    """The interpreter's own environment when it is a virtualenv made inside ``roots`` (the
    worktree: ``TILTH_SETUP_COMMAND``, ``uv sync``), else nothing. Read-only to the worker,
    it counts as the environment, not as the worktree; a worktree that lay inside the
    interpreter's installation would still count as the worktree."""
    prefix = os.path.realpath(sys.prefix)
    return [prefix] if _inside(prefix, roots) else []


def _compile_worktree_from_source(roots: list[str]) -> None:
    """Modules under ``roots`` are compiled from source: no ``.pyc`` there is ever read.

    Except inside the interpreter's own environment: a virtualenv made in the worktree
    (``TILTH_SETUP_COMMAND``, ``uv sync``) is read-only to the worker, and compiling every
    dependency afresh would cost seconds at every gate.
    """
    from importlib import machinery
    from types import CodeType

    class FromSource(machinery.SourceFileLoader):
        def get_code(self, fullname: str) -> CodeType:
            path = self.get_filename(fullname)
            return self.source_to_code(self.get_data(path), path)

    loaders = [
        (machinery.ExtensionFileLoader, machinery.EXTENSION_SUFFIXES),
        (FromSource, machinery.SOURCE_SUFFIXES),
    ]
    make = machinery.FileFinder.path_hook(*loaders)

    own = _virtualenv_in(roots)

    def hook(entry: str) -> Any:
        if not _inside(entry, roots) or _inside(entry, own):
            raise ImportError("not in the worktree")  # the next hook takes it
        return make(entry)

    sys.path_hooks.insert(0, hook)
    sys.path_importer_cache.clear()


def _no_rewritten_bytecode_from(roots: list[str], scratch: str) -> None:
    """pytest's assertion rewriter caches the modules it rewrites (test files, conftests,
    plugins) beside their source and reads them back, checked against the source's hash
    only: for modules under ``roots`` it never reads that cache."""
    from _pytest.assertion import rewrite

    read = getattr(rewrite, "_read_pyc", None)
    if read is None:  # a pytest that reads it otherwise: keep every cache out of reach
        sys.pycache_prefix = os.path.join(scratch, "pycache")
        return

    def read_outside(source: Any, pyc: Any, trace: Any = lambda _: None) -> Any:
        return None if _inside(str(source), roots) else read(source, pyc, trace)

    rewrite._read_pyc = read_outside


def _start_site(worktree: list[str]) -> None:
    """What ``site`` does at start-up (run with ``-S``, the launcher calls it), except that no
    module is imported from ``worktree`` (outside the interpreter's own environment) then:
    a virtualenv's editable install puts worktree directories on ``sys.path`` as it runs,
    and ``site`` goes on to import ``sitecustomize`` (and what a ``.pth`` line imports)
    from anywhere on it."""
    import site
    from importlib.machinery import PathFinder

    class NotFromWorktree:
        @staticmethod
        def find_spec(name: str, path: Any = None, target: Any = None) -> Any:
            if path is not None:
                return None  # a submodule: where its package was found decides
            own = _virtualenv_in(worktree)
            outside = [p for p in sys.path if _inside(p, own) or not _inside(p, worktree)]
            if len(outside) == len(sys.path):
                return None
            spec = PathFinder.find_spec(name, outside)
            if spec is None:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return spec

    finder = NotFromWorktree()
    at = sys.meta_path.index(PathFinder) if PathFinder in sys.meta_path else len(sys.meta_path)
    sys.meta_path.insert(at, finder)
    try:
        if sys.flags.no_site:
            site.main()
    finally:
        sys.meta_path.remove(finder)


def _started_in_worktree(worktree: list[str]) -> list[str]:
    """The entries of ``sys.path`` inside ``worktree`` (but not inside the interpreter's own
    environment) at start-up: what an editable install's ``.pth`` file in a virtualenv made
    in the worktree names (``src/``, or the worktree itself)."""
    own = _virtualenv_in(worktree)
    return [p for p in sys.path if p and _inside(p, worktree) and not _inside(p, own)]


def _plugin_links(directories: list[str], scratch: str) -> list[str]:
    """Directories (under ``scratch``) of links to the modules in ``directories`` that the
    installed ``pytest11`` entry points name, and to nothing else (a project that is itself
    a pytest plugin, installed editable in a virtualenv made in the worktree)."""
    from importlib import metadata

    names = set()
    for dist in metadata.distributions():
        for point in dist.entry_points:
            if point.group == "pytest11":
                names.add(point.value.split(":", 1)[0].split(".", 1)[0].strip())
    homes = []
    for number, directory in enumerate(directories):
        home = os.path.join(scratch, "started-plugins", str(number))
        for entry in sorted(f for name in names for f in (name, name + ".py")):
            if os.path.exists(os.path.join(directory, entry)):
                os.makedirs(home, exist_ok=True)
                if not os.path.lexists(os.path.join(home, entry)):
                    os.symlink(os.path.join(directory, entry), os.path.join(home, entry))
        if os.path.isdir(home):
            homes.append(home)
    return homes


def main(argv: list[str]) -> int:
    report, args = argv[1], argv[3:]
    with open(argv[2], encoding="utf-8") as handle:
        plan = json.load(handle)
    imports = [str(p) for p in plan["imports"]]
    _start_site([os.path.realpath(p) for p in imports])
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    # A virtualenv in the worktree with the project installed editable names worktree
    # directories on sys.path from the start: out of it until the tests import code, or
    # plugin metadata the worker left there (a ``*.egg-info`` of ``src/``) would be loaded.
    late = _started_in_worktree([os.path.realpath(p) for p in imports])
    sys.path[:] = [p for p in sys.path if p not in late]
    import pytest

    scratch = os.path.dirname(os.path.abspath(report))
    early = [str(p) for p in plan.get("early", [])] + _plugin_links(late, scratch)
    sources = [*imports, *early, *(str(p) for p in plan.get("from_source", []))]
    roots = [os.path.realpath(p) for p in sources]
    _compile_worktree_from_source(roots)
    _no_rewritten_bytecode_from(roots, scratch)
    # The project's own pytest plugins, and only they, are importable while pytest loads
    # plugins (an editable install would find the user's copy of them).
    sys.path[:0] = early

    class JoinWorktree:
        @pytest.hookimpl(tryfirst=True)
        def pytest_load_initial_conftests(self) -> None:
            # The first moment project code is imported (conftests, then the tests); plugins
            # were loaded from the environment alone. First, as ``python -m pytest`` (and a
            # ``pythonpath`` setting) has it.
            rest = [p for p in sys.path if p not in early]
            sys.path[:] = [*imports, *rest, *(p for p in late if p not in imports)]
            # A CLI the tests run as a child process imports what an editable install
            # points at, as in the worker's bash; not before now, or pytest's own start-up
            # would import from the worktree.
            children = [str(p) for p in plan.get("children", [])]
            if children:
                rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
                os.environ["PYTHONPATH"] = os.pathsep.join([*children, *rest])

    class JustTheTests:
        """Options a configuration's addopts sets for the whole suite that the gate's run
        of a few seed tests turns off (wrappers: they act before any plugin's own hook)."""

        @pytest.hookimpl(hookwrapper=True)
        def pytest_load_initial_conftests(self, early_config: Any) -> Any:
            # pytest-cov's --cov measures the whole project, and a threshold for the suite
            # (--cov-fail-under) would fail every run of a handful of tests.
            if hasattr(early_config.known_args_namespace, "no_cov"):
                early_config.known_args_namespace.no_cov = True
            yield

        @pytest.hookimpl(hookwrapper=True)
        def pytest_cmdline_main(self, config: Any) -> Any:
            # pytest-xdist's ``-n`` would run the tests in workers started without this
            # launcher, whose outcomes the recorder never sees.
            if hasattr(config.option, "numprocesses"):
                config.option.numprocesses = 0
            if hasattr(config.option, "no_cov"):
                config.option.no_cov = True
            yield

    if plan.get("cache_dir"):
        args = ["-o", f"cache_dir={plan['cache_dir']}", *args]
    recorder = Recorder()
    code = int(pytest.main(args, plugins=[JoinWorktree(), JustTheTests(), recorder]))
    recorder.dump(report, code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
