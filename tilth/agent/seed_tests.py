"""Running the seed tests (and an optional linter) in the worktree: the objective gate.

Tests and the linter run in the project's environment (``tilth.project_env``, never
Tilth's own interpreter); in their own process group, with a timeout, without API keys
in their environment and without writing caches the stage commit would pick up.
The seed is the contract: given the seed commit, the gate runs that commit's
copies of the seed tests (materialised in a private directory, inside the
sandbox when there is one) and refuses a worktree that changed them.
"""

from __future__ import annotations

import configparser
import os
import re
import shlex
import tempfile
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from tilth import git, proc
from tilth.agent.case import fence
from tilth.agent.gate_evidence import gate_scratch, runner_words, shortfall
from tilth.proc import scrubbed_env
from tilth.project_env import ProjectEnv
from tilth.tools.pipes import remove_named_pipes
from tilth.tools.sandbox import Sandbox

OUTPUT_CAP = 4_000
_TASK_FILE_RE = re.compile(r"^test_(t\d{3,})_[a-z0-9_]+\.py$")


@dataclass(frozen=True)
class Check:
    """One validator's result."""

    name: str
    passed: bool
    output: str
    command: str = ""


@dataclass(frozen=True)
class GateRun:
    """What one gate produced: every check, and the seed test files involved."""

    checks: list[Check] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    tampered: list[str] = field(default_factory=list)
    """Seed test files the worktree changed (the gate refused to run them)."""

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    def report(self, cap: int = OUTPUT_CAP) -> str:
        """Every check as ``[name] PASS|FAIL`` plus its (capped) output."""
        parts = []
        for check in self.checks:
            status = "PASS" if check.passed else "FAIL"
            # Fenced: the output is the worker's code talking, not the harness.
            output = fence(clip(check.output, cap) or "(no output)", "text")
            parts.append(f"[{check.name}] {status}\n{output}")
        return "\n\n".join(parts)

    def to_dict(self) -> dict[str, object]:
        return {
            "passed": self.passed,
            "files": self.files,
            "tampered": self.tampered,
            "checks": [
                {"name": c.name, "passed": c.passed, "command": c.command, "output": clip(c.output)}
                for c in self.checks
            ],
        }


def clip(text: str, cap: int = OUTPUT_CAP) -> str:
    """``text`` cut to ``cap`` characters with a note saying how much there was."""
    text = text.rstrip()
    if len(text) <= cap:
        return text
    return text[:cap] + f"\n... [truncated, total {len(text)} chars]"


def slug_of(task_id: str) -> str:
    """``T-001`` → ``t001`` (the prefix of its seed test files)."""
    return re.sub(r"[^a-z0-9]", "", task_id.lower())


def seed_test_files(worktree: Path, task_ids: Iterable[str]) -> list[str]:
    """Workspace-relative seed test files of ``task_ids`` (``tests/test_t<NNN>_*.py``)."""
    tests = worktree / "tests"
    if not tests.is_dir():
        return []
    wanted = {slug_of(task_id) for task_id in task_ids}
    found = []
    for path in sorted(tests.iterdir()):
        match = _TASK_FILE_RE.match(path.name)
        if match and match.group(1) in wanted and path.is_file():
            found.append(f"tests/{path.name}")
    return found


# Files of the seed commit the seed tests may rely on, materialised beside them.
_SUPPORT_FILES = ("conftest.py", "tests/conftest.py", "tests/__init__.py")
# pytest's own search order; a file counts when it holds one of the sections ("" = always).
# pytest.toml, .pytest.toml and pyproject's [tool.pytest] are pytest 9's native TOML.
_PYTEST_CONFIGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pytest.toml", ("",)),
    (".pytest.toml", ("",)),
    ("pytest.ini", ("",)),
    (".pytest.ini", ("",)),
    ("pyproject.toml", ("[tool.pytest.ini_options]", "[tool.pytest]")),
    ("tox.ini", ("[pytest]",)),
    ("setup.cfg", ("[tool:pytest]",)),
)


@dataclass(frozen=True)
class SeedCopies:
    """The seed commit's copies of some seed tests, with what pytest needs beside them."""

    sha: str
    tests: dict[str, str]
    """Seed test path → content at the seed commit."""
    support: dict[str, str] = field(default_factory=dict)
    """conftest.py / ``tests/__init__.py`` / pytest config at the seed commit."""
    config: str | None = None
    """The pytest configuration file among ``support``, if the seed commit has one."""


def files_at(sha: str, paths: Sequence[str], worktree: Path) -> dict[str, str]:
    """Content of each of ``paths`` that exists at ``sha``."""
    if not paths:
        return {}
    # One listing and one batch read, whatever the number of paths.
    listed = git.git("ls-tree", "-z", sha, "--", *paths, cwd=worktree)
    blobs: dict[str, str] = {}
    for entry in filter(None, listed.split("\0")):
        meta, _, path = entry.partition("\t")
        _, kind, blob = meta.split(" ")
        if kind == "blob" and path in paths:
            blobs[path] = blob
    contents = git.read_blobs(worktree, list(blobs.values()))
    return {path: contents[blob].decode("utf-8", "replace") for path, blob in blobs.items()}


def seed_copies(worktree: Path, sha: str, task_ids: Iterable[str]) -> SeedCopies:
    """The seed test files of ``task_ids`` as the seed commit ``sha`` has them."""
    wanted = {slug_of(task_id) for task_id in task_ids}
    listed = git.git("ls-tree", "--name-only", sha, "tests/", cwd=worktree).splitlines()
    names = []
    for path in sorted(listed):
        match = _TASK_FILE_RE.match(path.removeprefix("tests/"))
        if match and match.group(1) in wanted:
            names.append(path)
    configs = [name for name, _ in _PYTEST_CONFIGS]
    found = files_at(sha, [*_SUPPORT_FILES, *configs, *names], worktree)
    support = {path: found[path] for path in _SUPPORT_FILES if path in found}
    config = None
    for name, sections in _PYTEST_CONFIGS:
        text = found.get(name)
        if text is not None and any(section in text for section in sections):
            support[name], config = text, name
            break
    return SeedCopies(sha, {path: found[path] for path in names if path in found}, support, config)


def config_pythonpath(copies: SeedCopies) -> list[str] | None:
    """The ``pythonpath`` entries of the seed's pytest configuration (None: it sets none).

    pytest resolves them against the configuration file's directory, which for the gate is
    the private copy, so the gate puts them on ``PYTHONPATH`` resolved against the worktree.
    """
    text = copies.support.get(copies.config or "")
    if text is None:
        return None
    try:
        if copies.config == "pyproject.toml":
            pytest = tomllib.loads(text).get("tool", {}).get("pytest", {})
            options = pytest.get("ini_options", pytest) if isinstance(pytest, dict) else {}
            value = options.get("pythonpath") if isinstance(options, dict) else None
        elif copies.config in ("pytest.toml", ".pytest.toml"):
            options = tomllib.loads(text).get("pytest", {})
            value = options.get("pythonpath") if isinstance(options, dict) else None
        else:
            parser = configparser.ConfigParser(interpolation=None)
            parser.read_string(text)
            section = "tool:pytest" if copies.config == "setup.cfg" else "pytest"
            value = parser.get(section, "pythonpath", fallback=None)
    except (tomllib.TOMLDecodeError, configparser.Error, ValueError):
        return None  # pytest reports a broken configuration itself
    if isinstance(value, str):
        return shlex.split(value)
    if isinstance(value, list) and all(isinstance(entry, str) for entry in value):
        return value
    return None


def changed_seed_tests(worktree: Path, copies: SeedCopies) -> list[str]:
    """Seed test files whose worktree copy differs from the seed commit's, or is gone."""
    paths = sorted(copies.tests)
    if not paths:
        return []
    listed = git.git("ls-tree", "-l", "-z", copies.sha, "--", *paths, cwd=worktree)
    seed: dict[str, tuple[str, int]] = {}  # path → (blob, size)
    for entry in filter(None, listed.split("\0")):
        meta, _, path = entry.partition("\t")
        _, _, blob, size = meta.split()
        seed[path] = (blob, int(size))
    # Hash only what has the seed's size: a changed size is a change, and a file the worker
    # made huge (sparse, so free) would keep git hashing past its timeout.
    present = [
        p for p in paths if _plain_file(worktree, p) and (worktree / p).stat().st_size == seed[p][1]
    ]
    now = git.git("hash-object", "--", *present, cwd=worktree).split() if present else []
    current = dict(zip(present, now, strict=True))
    return [p for p in paths if current.get(p) != seed[p][0]]


def _plain_file(root: Path, rel: str) -> bool:
    """``root/rel`` is a regular file reached through no link (a linked ``tests/`` reads the
    same but commits as a link where the seed tests were)."""
    parts = Path(rel).parts
    steps = [root.joinpath(*parts[:n]) for n in range(1, len(parts) + 1)]
    return (root / rel).is_file() and not any(step.is_symlink() for step in steps)


def tampering_message(changed: Sequence[str], sha: str) -> str:
    """What the worker reads when its diff changes a seed test."""
    restore = "; ".join(f"git show {sha[:12]}:{p} > {p}" for p in changed)
    return (
        "REFUSED: your changes modify the seed test file(s) "
        + ", ".join(changed)
        + ". The seed tests are the contract of this task: the harness always runs the seed "
        "commit's copies, and a case whose diff changes them is not accepted. Restore them "
        f"(`{restore}`) and make the code pass them. Write any extra tests you want in new "
        "files; they are yours to run with bash."
    )


_CONFIG_NAMES = frozenset(name for name, _ in _PYTEST_CONFIGS)
# Never linked from the worktree: what would let a worker change how the seed tests run.
_NEVER_LINKED = frozenset({"conftest.py", "__init__.py", "__pycache__", *_CONFIG_NAMES})


@contextmanager
def materialised(
    copies: SeedCopies, worktree: Path | None = None, *, configs_named: bool = False
) -> Iterator[Path]:
    """A private directory holding the seed copies (and their support files).

    With ``worktree``, the directory mirrors it: every other entry of its top level and of
    its ``tests/`` is linked in, so seed tests and conftest files that find files beside
    them (a helper module, a data directory, ``src/`` put on ``sys.path``, the repository
    root as ``Path(__file__).parents[1]``) run as they do in the worktree. Other seed
    tests, conftest files and ``__init__.py`` are never linked; nor is a file named like a
    pytest configuration, unless ``configs_named`` says the run names its configuration
    file (so pytest reads only that one, whatever the worktree holds).
    """
    skipped = _NEVER_LINKED - _CONFIG_NAMES if configs_named else _NEVER_LINKED
    with tempfile.TemporaryDirectory(prefix="tilth-seed-") as tmp:
        root = Path(tmp).resolve()
        for path, text in {**copies.support, **copies.tests}.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        if worktree is not None:
            _link_entries(worktree, root, skipped)
            tests = worktree / "tests"
            if (root / "tests").is_dir() and tests.is_dir() and not tests.is_symlink():
                _link_entries(tests, root / "tests", skipped)
        yield root


def _link_entries(source: Path, target: Path, skipped: frozenset[str]) -> None:
    """Link each entry of ``source`` into ``target`` where ``target`` has none of that name."""
    for entry in sorted(source.iterdir()):
        if entry.name in skipped or _TASK_FILE_RE.match(entry.name):
            continue
        link = target / entry.name
        if not link.exists() and not link.is_symlink():
            link.symlink_to(entry)


def child_env(
    secrets: Sequence[str], environment: ProjectEnv | None = None, *, worktree_imports: bool = True
) -> dict[str, str]:
    """The worker ``bash``'s environment (scrubbed, project env active), caches turned off.

    ``worktree_imports=False`` leaves the environment's worktree directories off
    ``PYTHONPATH`` (the gate's launcher adds them once pytest has loaded).
    """
    env = scrubbed_env(os.environ, secrets)
    if environment is not None:
        env = environment.activate(env, worktree_imports=worktree_imports)
    return {**env, "PYTHONDONTWRITEBYTECODE": "1"}


def _output(result: proc.ProcResult, worktree: Path, *others: Path) -> str:
    """stdout then stderr, with the worktree's (and ``others``') absolute path shown as relative."""
    text = result.stdout + ("\n" + result.stderr if result.stderr.strip() else "")
    return _output_paths(text, worktree, *others)


def _output_paths(text: str, worktree: Path, *others: Path) -> str:
    """``text`` with the worktree's (and ``others``') absolute paths shown as relative."""
    # Models see workspace-relative paths only; the session's location stays private.
    # pytest names a test outside the directory it was started in (the seed copies) by a
    # path relative to that directory: ``../../tmp/tilth-seed-x/tests/test_t001_a.py``.
    relative = [
        os.path.relpath(p, start) for p in others for start in (worktree, worktree.resolve())
    ]
    roots = (*relative, *(str(p) for p in others), str(worktree.resolve()), str(worktree))
    for root in dict.fromkeys(roots):
        text = text.replace(root + os.sep, "").replace(root, ".")
    return text.strip()


def _confined(
    cmd: list[str], sandbox: Sandbox | None, *readable: Path, scratch: tuple[Path, ...] = ()
) -> list[str]:
    if sandbox is None:
        return cmd
    return replace(sandbox, readable=(*sandbox.readable, *readable), scratch=scratch).wrap(cmd)


def run_pytest(
    worktree: Path,
    files: Sequence[str],
    *,
    environment: ProjectEnv,
    timeout: float,
    secrets: Sequence[str] = (),
    copies: SeedCopies | None = None,
    sandbox: Sandbox | None = None,
) -> Check:
    """The seed tests ``files`` as ``environment`` runs them; with ``copies``, the seed's files."""
    if not files:
        return Check("pytest", True, "(no seed tests matched; nothing to run)")
    name = "tests" if environment.kind == "command" else "pytest"
    with ExitStack() as stack:
        scratch = None if environment.kind == "command" else stack.enter_context(gate_scratch())
        # Worktree directories the tests import from besides the worktree itself: the seed
        # configuration's ``pythonpath`` (pytest would resolve it against the private copy)
        # and where an editable install of the source's virtualenv points.
        configured = (
            [worktree / entry for entry in config_pythonpath(copies) or []] if copies else []
        )
        imports = [*configured, *environment.pythonpath]
        others: list[Path] = [scratch] if scratch else []
        args, options, root = list(files), [], None
        if copies is not None:
            # Named always (the seed's, else none), so pytest never looks for one among the
            # files the copy links in. A TILTH_TEST_COMMAND runs without these options.
            named = environment.kind != "command"
            root = stack.enter_context(materialised(copies, worktree, configs_named=named))
            others.append(root)
            args = [str(root / f) for f in files]
            config = root / copies.config if copies.config else Path(os.devnull)
            options = [f"--rootdir={root}", f"--confcutdir={root}", f"--config-file={config}"]
        launcher = ["-m", "pytest"]
        if scratch is not None:
            # The copy's links lead into the worktree: what they reach is compiled afresh too.
            sources = [root] if root else []
            launcher = runner_words(
                scratch,
                [*imports, worktree],
                from_source=sources,
                children=environment.pythonpath,
            )
        run = environment.pytest_invocation(args, options, launcher)
        argv = ["/bin/sh", "-c", run.args] if isinstance(run.args, str) else run.args
        cmd = _confined(argv, sandbox, *others, scratch=(scratch,) if scratch else ())
        # Through the launcher, never PYTHONPATH: a worktree directory importable at start-up
        # would let a file the worker left there (``pytest.py``, ``sitecustomize.py``) run
        # before pytest. A TILTH_TEST_COMMAND has no launcher, and gets them on PYTHONPATH.
        env = child_env(secrets, environment, worktree_imports=scratch is None)
        if scratch is None and configured:
            rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
            env["PYTHONPATH"] = os.pathsep.join([*map(str, configured), *rest])
        result = proc.run_capped(cmd, cwd=worktree, timeout=timeout, env=env)
        output = _output(result, worktree, *others)
        missing = (
            shortfall(scratch, result.returncode) if scratch and result.returncode == 0 else None
        )
    shown = _output_paths(run.shown, worktree, *others)
    if result.timed_out:
        return Check(name, False, f"timed out after {timeout:.0f}s: {shown}\n{output}", shown)
    if missing:
        why = _output_paths(missing, worktree, *others)
        return Check(name, False, f"{output}\n\n{why}".strip(), shown)
    return Check(name, result.returncode == 0, output, shown)


def run_lint(
    worktree: Path,
    command: str,
    *,
    timeout: float,
    secrets: Sequence[str] = (),
    environment: ProjectEnv | None = None,
    sandbox: Sandbox | None = None,
) -> Check:
    """The configured lint command (a shell line) in the worktree, in the project's env."""
    cmd = _confined(["/bin/sh", "-c", command], sandbox)
    env = child_env(secrets, environment)
    result = proc.run_capped(cmd, cwd=worktree, timeout=timeout, env=env)
    output = _output(result, worktree)
    if result.timed_out:
        return Check("lint", False, f"timed out after {timeout:.0f}s: {command}\n{output}", command)
    return Check("lint", result.returncode == 0, output, command)


def run_gate(
    worktree: Path,
    task_ids: Sequence[str],
    *,
    environment: ProjectEnv,
    timeout: float,
    lint_command: str | None = None,
    secrets: Sequence[str] = (),
    seed_sha: str | None = None,
    sandbox: Sandbox | None = None,
) -> GateRun:
    """The seed tests of ``task_ids``, then the linter when one is configured.

    With ``seed_sha`` the tests run are the seed commit's copies, never the worktree's,
    and a worktree whose seed tests differ from them fails the gate with
    ``tampered`` naming the files.
    """
    copies = None
    if seed_sha is None:
        files = seed_test_files(worktree, task_ids)
    else:
        copies = seed_copies(worktree, seed_sha, task_ids)
        files = sorted(copies.tests)
        changed = changed_seed_tests(worktree, copies)
        if changed:
            refusal = Check("seed-tests", False, tampering_message(changed, seed_sha))
            return GateRun([refusal], files, tampered=changed)
    try:
        return GateRun(
            _run_checks(
                worktree, files, environment, timeout, lint_command, secrets, copies, sandbox
            ),
            files,
        )
    finally:
        remove_named_pipes(worktree)  # the code ran: git must not block on what it left


def _run_checks(
    worktree: Path,
    files: list[str],
    environment: ProjectEnv,
    timeout: float,
    lint_command: str | None,
    secrets: Sequence[str],
    copies: SeedCopies | None,
    sandbox: Sandbox | None,
) -> list[Check]:
    checks = [
        run_pytest(
            worktree,
            files,
            environment=environment,
            timeout=timeout,
            secrets=secrets,
            copies=copies,
            sandbox=sandbox,
        )
    ]
    if lint_command:
        checks.append(
            run_lint(
                worktree,
                lint_command,
                timeout=timeout,
                secrets=secrets,
                environment=environment,
                sandbox=sandbox,
            )
        )
    return checks
