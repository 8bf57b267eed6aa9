"""The shapes every worker tool shares: the outcome, the observer seam, the tool spec."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tilth.tools.paths import Workspace

if TYPE_CHECKING:
    from tilth.environment.project import ProjectEnv
    from tilth.tools.sandbox import Sandbox


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call produced."""

    result: str
    """Text sent back to the model."""
    blocked: bool = False
    """The pre-tool guard vetoed the call."""
    is_error: bool = False
    """Bad arguments, an escape attempt or a tool failure."""


class ToolObserver(Protocol):
    """The seam checkpoints plug into: told about writes and commands before they happen.

    ``before_write`` receives the resolved path (always inside the workspace) an
    edit tool is about to write; ``before_bash``/``after_bash`` bracket every shell
    command that passed the guard (``after_bash`` runs even when it failed or timed
    out). Exceptions raised here are harness failures and propagate from dispatch.
    """

    def before_write(self, path: Path) -> None: ...

    def before_bash(self, command: str) -> None: ...

    def after_bash(self, command: str) -> None: ...


@dataclass(frozen=True)
class ToolContext:
    """What a running tool may use."""

    workspace: Workspace
    bash_timeout: float
    secrets: tuple[str, ...]
    environment: ProjectEnv | None = None
    """The project's environment, active in ``bash`` (None: Tilth's environment, scrubbed)."""
    sandbox: Sandbox | None = None
    """Where ``bash`` runs confined (None: unsandboxed)."""
    remove_pipes: bool = False
    """After each command, delete named pipes under the root (a run's worktree, which
    Tilth's git walks; see ``tilth.git.pipes``)."""


@dataclass(frozen=True)
class Param:
    """One argument of a tool."""

    name: str
    kind: str
    """JSON type: ``string`` (the only one the worker tools take today)."""
    description: str
    required: bool = True


Runner = Callable[[ToolContext, dict[str, Any]], str]


@dataclass(frozen=True)
class Tool:
    """A worker tool: its schema, how it runs, and what it touches."""

    name: str
    description: str
    params: tuple[Param, ...]
    run: Runner
    writes: Callable[[Workspace, dict[str, Any]], list[Path]] | None = None
    """Paths the call will write, resolved and confined (checked before running)."""
    command: Callable[[dict[str, Any]], str] | None = None
    """The shell command the call runs (guarded and observed)."""

    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry."""
        from tilth.model.base import function_tool

        properties = {p.name: {"type": p.kind, "description": p.description} for p in self.params}
        required = [p.name for p in self.params if p.required]
        return function_tool(self.name, self.description, properties, required)
