"""Running the seed tests (and an optional linter) in the worktree: the objective gate.

Tests and the linter run in the project's environment (``tilth.project_env``, never
Tilth's own interpreter); in their own process group, with a timeout, without API keys
in their environment and without writing caches the stage commit would pick up.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tilth import proc
from tilth.project_env import ProjectEnv
from tilth.tools.shell import scrubbed_env

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

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    def report(self, cap: int = OUTPUT_CAP) -> str:
        """Every check as ``[name] PASS|FAIL`` plus its (capped) output."""
        parts = []
        for check in self.checks:
            status = "PASS" if check.passed else "FAIL"
            parts.append(f"[{check.name}] {status}\n{clip(check.output, cap) or '(no output)'}")
        return "\n\n".join(parts)

    def to_dict(self) -> dict[str, object]:
        return {
            "passed": self.passed,
            "files": self.files,
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


def child_env(secrets: Sequence[str], environment: ProjectEnv | None = None) -> dict[str, str]:
    """The worker ``bash``'s environment (scrubbed, project env active), caches turned off."""
    env = scrubbed_env(os.environ, secrets)
    if environment is not None:
        env = environment.activate(env)
    return {**env, "PYTHONDONTWRITEBYTECODE": "1"}


def _output(result: proc.ProcResult, worktree: Path) -> str:
    """stdout then stderr, with the worktree's absolute path shown as relative."""
    text = result.stdout + ("\n" + result.stderr if result.stderr.strip() else "")
    # Models see workspace-relative paths only; the session's location stays private.
    for root in dict.fromkeys((str(worktree.resolve()), str(worktree))):
        text = text.replace(root + os.sep, "").replace(root, ".")
    return text.strip()


def run_pytest(
    worktree: Path,
    files: Sequence[str],
    *,
    environment: ProjectEnv,
    timeout: float,
    secrets: Sequence[str] = (),
) -> Check:
    """The seed tests ``files`` in the worktree, as ``environment`` runs pytest."""
    if not files:
        return Check("pytest", True, "(no seed tests matched; nothing to run)")
    run = environment.pytest_invocation(files)
    shown = run.shown
    name = "tests" if environment.kind == "command" else "pytest"
    env = child_env(secrets, environment)
    result = proc.run(run.args, cwd=worktree, timeout=timeout, env=env, shell=run.shell)
    output = _output(result, worktree)
    if result.timed_out:
        return Check(name, False, f"timed out after {timeout:.0f}s: {shown}\n{output}", shown)
    return Check(name, result.returncode == 0, output, shown)


def run_lint(
    worktree: Path,
    command: str,
    *,
    timeout: float,
    secrets: Sequence[str] = (),
    environment: ProjectEnv | None = None,
) -> Check:
    """The configured lint command (a shell line) in the worktree, in the project's env."""
    env = child_env(secrets, environment)
    result = proc.run(command, cwd=worktree, timeout=timeout, env=env, shell=True)
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
) -> GateRun:
    """The seed tests of ``task_ids``, then the linter when one is configured."""
    files = seed_test_files(worktree, task_ids)
    checks = [
        run_pytest(worktree, files, environment=environment, timeout=timeout, secrets=secrets)
    ]
    if lint_command:
        checks.append(
            run_lint(
                worktree, lint_command, timeout=timeout, secrets=secrets, environment=environment
            )
        )
    return GateRun(checks, files)
