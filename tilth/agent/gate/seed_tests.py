"""Running the seed tests (and an optional linter) in the worktree: the objective gate.

Tests and the linter run in the project's environment (``tilth.environment.project``, never
Tilth's own interpreter); in their own process group, with a timeout, without API keys
in their environment and without writing caches the stage commit would pick up.
The seed is the contract: given the seed commit, the gate runs that commit's
copies of the seed tests (materialised in a private directory, inside the
sandbox when there is one) and refuses a worktree that changed them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

from tilth import proc
from tilth.agent.case import fence
from tilth.agent.gate.evidence import (
    PLUGIN_LINKS,
    gate_scratch,
    plugin_links,
    runner_words,
    shortfall,
)
from tilth.agent.gate.seed_copies import (
    SeedCopies,
    changed_seed_tests,
    config_pythonpath,
    materialised,
    seed_copies,
    seed_test_files,
    slug_of,
    tampering_message,
)
from tilth.environment.project import ProjectEnv
from tilth.git.pipes import remove_named_pipes
from tilth.proc import scrubbed_env
from tilth.tools.launcher import CONTAINED, Launcher
from tilth.tools.sandbox import Sandbox

OUTPUT_CAP = 4_000


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
) -> tuple[list[str], Launcher]:
    """The command as the sandbox runs it, and how it starts (contained even without one)."""
    if sandbox is None:
        return cmd, CONTAINED
    confined = replace(sandbox, readable=(*sandbox.readable, *readable), scratch=scratch)
    return confined.wrap(cmd), confined.launcher()


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
        return Check("pytest", False, "no seed tests to run: the gate fails closed")
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
        # Most specific first: the plugin links read as where they lead (``src/pytest_x``).
        others: list[Path] = [scratch / PLUGIN_LINKS, scratch] if scratch else []
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
                early=plugin_links(scratch, worktree, environment.plugins),
            )
        run = environment.pytest_invocation(args, options, launcher)
        argv = ["/bin/sh", "-c", run.args] if isinstance(run.args, str) else run.args
        cmd, launch = _confined(argv, sandbox, *others, scratch=(scratch,) if scratch else ())
        # Through the launcher, never PYTHONPATH: a worktree directory importable at start-up
        # would let a file the worker left there (``pytest.py``, ``sitecustomize.py``) run
        # before pytest. A TILTH_TEST_COMMAND has no launcher, and gets them on PYTHONPATH.
        env = child_env(secrets, environment, worktree_imports=scratch is None)
        if scratch is None and configured:
            rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
            env["PYTHONPATH"] = os.pathsep.join([*map(str, configured), *rest])
        result = proc.run_capped(cmd, cwd=worktree, timeout=timeout, env=env, launch=launch)
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
    cmd, launch = _confined(["/bin/sh", "-c", command], sandbox)
    env = child_env(secrets, environment)
    result = proc.run_capped(cmd, cwd=worktree, timeout=timeout, env=env, launch=launch)
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
    # Fail closed: a task whose seed tests cannot be found never passes.
    prefixes = {t: f"tests/test_{slug_of(t)}_" for t in task_ids}
    untested = [t for t, prefix in prefixes.items() if not any(f.startswith(prefix) for f in files)]
    if untested:
        where = f"the seed commit {seed_sha[:12]}" if seed_sha else "the worktree"
        missing = Check(
            "seed-tests",
            False,
            f"no seed test of {', '.join(untested)} in {where} "
            "(tests/test_t<NNN>_<slug>.py): the gate cannot pass a task it cannot test",
        )
        return GateRun([missing], files)
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
