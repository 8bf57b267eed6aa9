"""The project's own Python environment: where seed tests, the linter and ``bash`` run.

A ``pip install`` of Tilth has no pytest and none of the project's dependencies, so
nothing the project runs may fall back to Tilth's interpreter. ``resolve_project_env``
picks, in SPEC §5.4's order: ``TILTH_TEST_COMMAND``; a virtualenv in the worktree; one
in the source repository; ``uv run`` when the project has a ``uv.lock``; the first
``python3`` on PATH outside Tilth's installation that imports pytest. Otherwise it
raises ``ProjectEnvError`` naming what was tried. ``check_project_env`` is the
pre-flight: the chosen environment must start before any model call is made.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tilth import proc
from tilth.environment.editable_installs import editable_dirs, editable_plugins
from tilth.errors import ProjectEnvError
from tilth.proc import scrubbed_env

if TYPE_CHECKING:
    from tilth.config import Settings

Kind = Literal["command", "worktree-venv", "source-venv", "uv", "python"]
VENV_NAMES = (".venv", "venv")
WORKTREE_ENTRIES = (*VENV_NAMES, "uv.lock")
"""What in a worktree can choose the environment (and so must be there before the worker)."""
PYTEST_ARGS = ("-x", "-q")
PROBE_TIMEOUT = 30.0
CHOOSE_HINT = (
    "set TILTH_TEST_COMMAND to the shell line that runs your tests ({files} = the test files), "
    "or TILTH_SETUP_COMMAND to build a .venv in each worktree (see docs/configuration.md)"
)


@dataclass(frozen=True)
class TestInvocation:
    """How to run the seed tests: an argv (or a shell line) and how to show it."""

    __test__ = False  # not a pytest test class, despite the name

    args: list[str] | str
    shell: bool
    shown: str


@dataclass(frozen=True)
class ProjectEnv:
    """The environment the project's code runs in, as chosen by ``resolve_project_env``."""

    kind: Kind
    description: str
    """One line for people: what was chosen and why."""
    venv: Path | None = None
    """The virtualenv, for the venv kinds (becomes ``VIRTUAL_ENV``)."""
    bin_dir: Path | None = None
    """Put first on ``PATH`` so ``python``/``pytest`` in ``bash`` mean what the gate means."""
    python: Path | None = None
    """The interpreter that runs pytest (venv and python kinds)."""
    command: str | None = None
    """The ``TILTH_TEST_COMMAND`` template (command kind)."""
    prefix: Path | None = None
    """The interpreter's ``sys.prefix`` (python kind): its installation, a virtualenv kept
    outside the repository when one is active."""
    pythonpath: tuple[Path, ...] = ()
    """Worktree directories put first on ``PYTHONPATH``: where the source virtualenv's
    editable installs point, moved from the source repository into the worktree."""
    plugins: tuple[tuple[str, Path], ...] = ()
    """The project's own pytest plugins (``pytest11`` entry points of an editable install):
    module name and the worktree directory the gate loads it from."""
    ignored: tuple[Path, ...] = ()
    """Worktree entries passed over because they appeared after the worker started."""

    def activate(self, env: Mapping[str, str], *, worktree_imports: bool = True) -> dict[str, str]:
        """A copy of ``env`` with this environment active (bin dir first, ``VIRTUAL_ENV``;
        with ``worktree_imports``, its worktree directories first on ``PYTHONPATH``)."""
        active = dict(env)
        if self.bin_dir is not None:
            rest = [p for p in active.get("PATH", os.defpath).split(os.pathsep) if p]
            first = str(self.bin_dir)
            active["PATH"] = os.pathsep.join([first, *[p for p in rest if p != first]])
        if self.venv is not None:
            active["VIRTUAL_ENV"] = str(self.venv)
            active.pop("PYTHONHOME", None)
        if self.pythonpath and worktree_imports:
            rest = [p for p in active.get("PYTHONPATH", "").split(os.pathsep) if p]
            active["PYTHONPATH"] = os.pathsep.join([*map(str, self.pythonpath), *rest])
        return active

    def pytest_invocation(
        self,
        files: Sequence[str],
        options: Sequence[str] = (),
        launcher: Sequence[str] = ("-m", "pytest"),
    ) -> TestInvocation:
        """The command that runs ``files`` with pytest in the worktree.

        ``options`` are extra pytest options and ``launcher`` what starts pytest after the
        interpreter (the gate's ``pytest_runner``); a ``TILTH_TEST_COMMAND`` ignores both.
        """
        quoted = " ".join(shlex.quote(f) for f in files)
        if self.kind == "command":
            assert self.command is not None
            line = (
                self.command.replace("{files}", quoted)
                if "{files}" in self.command
                else f"{self.command} {quoted}".rstrip()
            )
            return TestInvocation(line, True, line)
        tail = [*PYTEST_ARGS, *options, *files]
        if self.kind == "uv":
            argv = ["uv", "run", "python", *launcher, *tail]
            return TestInvocation(argv, False, shlex.join(["uv", "run", "pytest", *tail]))
        assert self.python is not None
        argv = [str(self.python), *launcher, *tail]
        return TestInvocation(argv, False, "python -m pytest " + " ".join([*tail]))

    def readable_paths(self) -> tuple[Path, ...]:
        """Where this environment lives, for the sandbox to show read-only."""
        places: list[Path | None] = [self.venv, self.prefix, self.bin_dir]
        pythons = [self.python]
        if self.command is not None:  # the interpreter a test command starts, where it tells
            program = _program(self.command)
            found = shutil.which(os.path.expanduser(program)) if program else None
            pythons.append(Path(found) if found else None)
        for python in pythons:
            if python is not None:
                places += interpreter_places(python)
        return tuple(dict.fromkeys(p for p in places if p is not None))

    def to_dict(self) -> dict[str, object]:
        """The ``environment`` event's payload."""
        return {
            "kind": self.kind,
            "description": self.description,
            "venv": str(self.venv) if self.venv else None,
            "bin_dir": str(self.bin_dir) if self.bin_dir else None,
            "python": str(self.python) if self.python else None,
            "command": self.command,
            "pythonpath": [str(p) for p in self.pythonpath],
            "prefix": str(self.prefix) if self.prefix else None,
            "plugins": {name: str(where) for name, where in self.plugins},
        }


# ---- resolution ---------------------------------------------------------------------------------
def tilth_prefix() -> Path:
    """Tilth's own installation (its interpreter's prefix), which is never the project's."""
    return Path(sys.prefix).resolve()


def _venv_in(root: Path, names: Sequence[str] = VENV_NAMES) -> Path | None:
    for name in names:
        if (root / name / "bin" / "python").exists():
            return root / name
    return None


def worktree_entries(worktree: Path) -> set[str]:
    """The ``WORKTREE_ENTRIES`` present in ``worktree``."""
    found = {name for name in VENV_NAMES if (worktree / name / "bin" / "python").exists()}
    return found | ({"uv.lock"} if (worktree / "uv.lock").is_file() else set())


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _venv_env(kind: Kind, venv: Path, where: str) -> ProjectEnv:
    return ProjectEnv(
        kind=kind,
        description=f"{where} virtualenv {venv}",
        venv=venv,
        bin_dir=venv / "bin",
        python=venv / "bin" / "python",
    )


def _reading_worktree(env: ProjectEnv, prefix: Path, source: Path, worktree: Path) -> ProjectEnv:
    """``env`` (whose installation is ``prefix``) with the editable installs that point into
    the source repository read from the worktree instead."""
    moved = [rel for rel in editable_dirs(prefix, source) if (worktree / rel).is_dir()]
    if not moved:
        return env
    shown = ", ".join(str(rel) if str(rel) != "." else "./" for rel in moved)
    return replace(
        env,
        description=f"{env.description} (its editable install read from the worktree: {shown})",
        pythonpath=tuple(worktree / rel for rel in moved),
        plugins=tuple(
            (name, worktree / rel) for name, rel in editable_plugins(prefix, source, moved)
        ),
    )


_PROBE = """import sys
print(sys.prefix)
for entry in sys.path:
    if entry:
        print(entry)
try:
    import pytest
except Exception:
    sys.exit(3)
"""

_probes: dict[Path, tuple[tuple[tuple[str, int], ...], Path, bool]] = {}
"""Answers of earlier probes in this process, by interpreter: valid while the interpreter
and every directory on its ``sys.path`` keep their modification times (installing or
removing a package changes its directory's)."""


def _stamps(paths: Sequence[Path | str]) -> tuple[tuple[str, int], ...]:
    found = []
    for path in paths:
        try:
            found.append((str(path), os.stat(path).st_mtime_ns))
        except OSError:
            found.append((str(path), -1))
    return tuple(found)


def _probe_python(python: Path) -> tuple[Path | None, bool]:
    """``(sys.prefix, can import pytest)`` of an interpreter; ``(None, False)`` if it fails.

    Starting an interpreter and importing pytest costs a few hundred milliseconds, and a
    run asks twice (choose, then pre-flight): the answer is kept while nothing it rests on
    changed."""
    key = Path(os.path.abspath(python))
    cached = _probes.get(key)
    if cached is not None:
        stamps, prefix, has_pytest = cached
        if _stamps([path for path, _ in stamps]) == stamps:
            return prefix, has_pytest
    result = proc.run([str(python), "-c", _PROBE], timeout=PROBE_TIMEOUT, env=_clean_env())
    lines = result.stdout.strip().splitlines()
    if result.timed_out or not lines or result.returncode not in (0, 3):
        return None, False
    prefix, has_pytest = Path(lines[0]), result.returncode == 0
    watched: list[Path | str] = [key, *lines[1:]]
    _probes[key] = (_stamps(watched), prefix, has_pytest)
    return prefix, has_pytest


def _clean_env() -> dict[str, str]:
    """Tilth's environment without secrets, Tilth's settings, or what would make another
    interpreter look like Tilth's (a probe runs outside any sandbox)."""
    env = scrubbed_env(os.environ)
    for key in ("PYTHONHOME", "PYTHONPATH", "VIRTUAL_ENV"):
        env.pop(key, None)
    return env


def _python_on_path(tried: list[str]) -> ProjectEnv | None:
    """The first ``python3`` on PATH, outside Tilth's installation, that can import pytest."""
    seen: set[Path] = set()
    own = tilth_prefix()
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(entry or ".") / "python3"
        if not candidate.is_file() or not os.access(candidate, os.X_OK):
            continue
        # By directory: venvs share their base interpreter's binary but not its prefix.
        key = candidate.parent.resolve()
        if key in seen:
            continue
        seen.add(key)
        prefix, has_pytest = _probe_python(candidate)
        if prefix is None:
            tried.append(f"{candidate} (does not start)")
            continue
        if _same(prefix, own):
            tried.append(f"{candidate} (Tilth's own interpreter)")
            continue
        if not has_pytest:
            tried.append(f"{candidate} (no pytest)")
            continue
        return ProjectEnv(
            kind="python",
            description=f"python3 on PATH: {candidate} (prefix {prefix})",
            bin_dir=candidate.parent,
            python=candidate,
            prefix=prefix,
        )
    if not seen:
        tried.append("python3 on PATH (none found)")
    return None


def resolve_project_env(
    worktree: Path,
    source: Path | None,
    settings: Settings,
    *,
    trusted: Collection[str] | None = None,
) -> ProjectEnv:
    """Choose the project's environment (SPEC §5.4's order); ``ProjectEnvError`` when none.

    ``source`` may equal ``worktree`` (``tilth doctor`` before any session exists); the
    worktree step is then skipped. Tilth's own interpreter is never chosen. ``trusted``
    names the ``WORKTREE_ENTRIES`` of the worktree that may be used (None: any); the
    others are passed over and listed in ``ignored``.
    """
    found = resolve_in_order(worktree, source, settings, trusted)
    if trusted is None or source is None or _same(source, worktree):
        return found
    ignored = sorted(worktree_entries(worktree) - set(trusted))
    return replace(found, ignored=tuple(worktree / name for name in ignored)) if ignored else found


def resolve_in_order(
    worktree: Path, source: Path | None, settings: Settings, trusted: Collection[str] | None
) -> ProjectEnv:
    """``resolve_project_env`` without the note of what it passed over."""
    command = (settings.test_command or "").strip()
    if command:
        env = ProjectEnv(
            kind="command", description=f"TILTH_TEST_COMMAND: {command}", command=command
        )
        venv = _venv_of_program(command)
        if venv is not None and source is not None and not _same(source, worktree):
            return _reading_worktree(env, venv, source, worktree)
        return env
    tried = ["TILTH_TEST_COMMAND (unset)"]
    own = tilth_prefix()
    roots: list[tuple[Kind, Path, str]] = []
    in_worktree = source is None or not _same(source, worktree)
    if in_worktree:
        roots.append(("worktree-venv", worktree, "worktree"))
    if source is not None:
        roots.append(("source-venv", source, "source repository's"))
    for kind, root, where in roots:
        names: tuple[str, ...] = VENV_NAMES
        if kind == "worktree-venv" and trusted is not None:
            names = tuple(name for name in VENV_NAMES if name in trusted)
        venv = _venv_in(root, names)
        if venv is None:
            tried.append(f"{root}/.venv or venv/ ({where.split()[0]}: none)")
            continue
        if _same(venv, own):
            tried.append(f"{venv} (Tilth's own installation)")
            continue
        if kind == "source-venv" and source is not None and not _same(source, worktree):
            return _reading_worktree(_venv_env(kind, venv, where), venv, source, worktree)
        return _venv_env(kind, venv, where)
    lock_here = trusted is None or not in_worktree or "uv.lock" in trusted
    locked = [
        r for r in (worktree if lock_here else None, source) if r and (r / "uv.lock").is_file()
    ]
    lock_root = locked[0] if locked else None
    if lock_root is not None and shutil.which("uv"):
        return ProjectEnv(kind="uv", description=f"uv run (the project has {lock_root}/uv.lock)")
    tried.append("uv run (" + ("uv not on PATH" if lock_root else "no uv.lock") + ")")
    found = _python_on_path(tried)
    if found is not None and found.prefix is not None and source is not None and in_worktree:
        # An activated virtualenv kept outside the repository (virtualenvwrapper, Poetry,
        # Hatch) holds the project installed editable just as a .venv inside it would.
        return _reading_worktree(found, found.prefix, source, worktree)
    if found is not None:
        return found
    raise ProjectEnvError(
        "no Python environment to run the project's tests in; tried: " + "; ".join(tried),
        hint=CHOOSE_HINT,
    )


def interpreter_places(python: Path) -> list[Path]:
    """Where an interpreter reads from: its directory, where a link to it really leads (Landlock
    checks the real place), a virtualenv's own directory (its ``pyvenv.cfg``), and the
    installation the real interpreter belongs to (``<prefix>`` of ``<prefix>/bin/python``): a
    virtualenv whose base Python lives under a home directory (pyenv, uv, conda) could not
    import its standard library under Landlock, which shows only what it is told. (Never read
    from ``pyvenv.cfg``: a worktree's virtualenv is files the model could have written.)"""
    real = python.resolve()
    places = [python.parent, real.parent]
    if (python.parent.parent / "pyvenv.cfg").is_file():
        places.append(python.parent.parent)
    if real.parent.name == "bin" and (real.parent.parent / "lib").is_dir():
        places.append(real.parent.parent)
    return places


# ---- the pre-flight ------------------------------------------------------------------------------
def _program(command: str) -> str | None:
    """The program a shell line starts (after ``VAR=value`` assignments), if one can be told."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for word in words:
        if "=" in word.split("/", 1)[0] and not word.startswith(("=", "/")):
            continue
        return word
    return None


def _venv_of_program(command: str) -> Path | None:
    """The virtualenv whose ``bin/`` holds the program a shell line starts, if it names one
    by path (``~/code/myrepo/.venv/bin/python -m pytest {files}``)."""
    program = _program(command)
    if program is None or "/" not in program:
        return None
    home = Path(os.path.expanduser(program)).parent.parent
    return home if home.is_absolute() and (home / "pyvenv.cfg").is_file() else None


def check_project_env(env: ProjectEnv, worktree: Path) -> None:
    """Raise ``ProjectEnvError`` when ``env`` cannot start (pytest missing, program not found)."""
    if env.kind == "command":
        assert env.command is not None
        program = _program(env.command)
        if program is None or program in _SHELL_WORDS or any(c in program for c in "$`*?"):
            return  # a shell construct or a variable: only running it can tell
        expanded = os.path.expanduser(program)
        if "/" in expanded:
            path = Path(expanded) if Path(expanded).is_absolute() else worktree / expanded
            if path.exists():
                return
        elif shutil.which(expanded, path=env.activate(os.environ).get("PATH")):
            return
        raise ProjectEnvError(
            f"TILTH_TEST_COMMAND runs `{program}`, which is not found (command: {env.command})",
            hint="fix TILTH_TEST_COMMAND, or unset it to let Tilth find the project's virtualenv",
        )
    if env.kind == "uv":
        if shutil.which("uv") is None:
            raise ProjectEnvError("uv is not on PATH", hint=CHOOSE_HINT)
        return
    assert env.python is not None
    prefix, has_pytest = _probe_python(env.python)
    if prefix is None:
        raise ProjectEnvError(f"{env.python} does not start ({env.description})", hint=CHOOSE_HINT)
    if not has_pytest:
        where = f"{env.venv}/bin/pip" if env.venv else f"{env.python} -m pip"
        raise ProjectEnvError(
            f"pytest is not installed in {env.description}",
            hint=f"install it: `{where} install pytest`; or set TILTH_TEST_COMMAND",
        )


_SHELL_WORDS = frozenset({"cd", "exec", "env", "(", "{", "!", "test", "[", "set", "source", "."})
