"""``ToolBox``: the one dispatch seam between the model's tool calls and the workspace."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tilth.environment.project import ProjectEnv
from tilth.errors import ToolError
from tilth.tools import files, search, shell
from tilth.tools.base import Tool, ToolContext, ToolObserver, ToolOutcome
from tilth.tools.guard import check_command
from tilth.tools.paths import Workspace
from tilth.tools.sandbox import Sandbox

WORKER_TOOL_NAMES = ("bash", "read_file", "write_file", "edit_file", "glob", "grep")
READ_ONLY_TOOL_NAMES = ("read_file", "glob", "grep")

REGISTRY: dict[str, Tool] = {
    tool.name: tool for tool in (*shell.TOOLS, *files.TOOLS, *search.TOOLS)
}

_JSON_TYPES = {"string": str}


class ToolBox:
    """A set of worker tools confined to ``root``.

    ``dispatch`` never raises for a model mistake: malformed arguments, unknown
    tools, escapes and tool failures all come back as an error ``ToolOutcome``
    the model can act on. Before an edit tool writes, the observer hears the
    resolved path; every shell command is checked by the guard, then bracketed
    by ``before_bash``/``after_bash``; with a ``sandbox``, ``bash`` runs inside it. A
    command the guard flags runs only when ``confirm`` (when given) approves it.
    """

    def __init__(
        self,
        root: Path,
        names: Sequence[str] = WORKER_TOOL_NAMES,
        *,
        observer: ToolObserver | None = None,
        bash_timeout: float = 120.0,
        secrets: Sequence[str] = (),
        environment: ProjectEnv | None = None,
        sandbox: Sandbox | None = None,
        confirm: Callable[[str, str], bool] | None = None,
        remove_pipes: bool = False,
    ) -> None:
        unknown = [name for name in names if name not in REGISTRY]
        if unknown:
            raise ValueError(f"unknown worker tool(s): {', '.join(unknown)}")
        self.workspace = Workspace(root)
        self.names = tuple(names)
        self.observer = observer
        self.confirm = confirm
        """``(command, reason) → run anyway?`` for a flagged command (a person in a chat)."""
        self._ctx = ToolContext(
            self.workspace,
            bash_timeout,
            tuple(s for s in secrets if s),
            environment=environment,
            sandbox=sandbox,
            remove_pipes=remove_pipes,
        )

    @property
    def root(self) -> Path:
        """The resolved workspace root."""
        return self.workspace.root

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI ``tools`` entries for this box's tools, in order."""
        return [REGISTRY[name].schema() for name in self.names]

    def dispatch(self, name: str, arguments: str | dict[str, Any]) -> ToolOutcome:
        """Run one tool call and say what happened."""
        if name not in self.names:
            return _error(f"unknown tool '{name}'. Available: {', '.join(self.names)}")
        tool = REGISTRY[name]
        try:
            args = _parse_arguments(tool, arguments)
        except ToolError as exc:
            return _error(exc.message)
        command = tool.command(args) if tool.command else None
        if command is not None:
            reason = check_command(command)
            if reason and not (self.confirm is not None and self.confirm(command, reason)):
                return ToolOutcome(
                    f"BLOCKED by the pre-tool guard ({reason}). Try a safer alternative.",
                    blocked=True,
                )
        try:
            targets = tool.writes(self.workspace, args) if tool.writes else []
        except ToolError as exc:
            return _error(exc.message)
        if self.observer is not None:
            for path in targets:
                self.observer.before_write(path)
            if command is not None:
                self.observer.before_bash(command)
        try:
            return ToolOutcome(tool.run(self._ctx, args))
        except ToolError as exc:
            return _error(exc.message)
        except (OSError, UnicodeError) as exc:
            return _error(f"{name} failed: {exc.__class__.__name__}: {exc}")
        finally:
            if self.observer is not None and command is not None:
                self.observer.after_bash(command)


def _error(message: str) -> ToolOutcome:
    return ToolOutcome(f"ERROR: {message}", is_error=True)


def _parse_arguments(tool: Tool, arguments: object) -> dict[str, Any]:
    """The call's arguments as a checked object; ``ToolError`` says what to fix."""
    usage = ", ".join(f"{p.name}" + ("" if p.required else "?") for p in tool.params)
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolError(
                f"{tool.name} arguments are not valid JSON ({exc.msg} at char {exc.pos}); "
                f"send an object with fields: {usage}"
            ) from None
        except RecursionError:
            raise ToolError(
                f"{tool.name} arguments are nested too deeply to be read; "
                f"send an object with fields: {usage}"
            ) from None
    else:
        value = arguments
    if not isinstance(value, dict):
        raise ToolError(
            f"{tool.name} arguments must be a JSON object with fields: {usage} "
            f"(got a JSON {_json_type(value)})"
        )
    for param in tool.params:
        present = param.name in value and value[param.name] is not None
        if not present:
            if param.required:
                raise ToolError(f"{tool.name} needs '{param.name}' ({param.kind}); fields: {usage}")
            continue
        expected = _JSON_TYPES[param.kind]
        if not isinstance(value[param.name], expected):
            raise ToolError(
                f"{tool.name}: '{param.name}' must be a {param.kind}, "
                f"got a JSON {_json_type(value[param.name])}"
            )
    return value


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return "null" if value is None else type(value).__name__
