"""The layout holds: recording below going back, no terminal code, no circles, one planner
and one executor for every go-back, the recorder used through its protocol."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import tilth

PACKAGE = Path(tilth.__file__).parent
TIMELINE = PACKAGE / "timeline"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of ``path``'s syntax tree, the module first (parsed once per process)."""
    return tuple(ast.walk(ast.parse(path.read_text("utf-8"))))


@cache
def _imports(path: Path) -> frozenset[str]:
    """Every ``tilth`` module ``path`` imports, outside ``if TYPE_CHECKING:`` blocks."""
    skip: set[int] = set()
    for node in _nodes(path):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    found: set[str] = set()
    for node in _nodes(path):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tilth"):
            found.add(node.module)
            found.update(
                f"{node.module}.{alias.name}"
                for alias in node.names
                if (PACKAGE.parent / f"{node.module}.{alias.name}".replace(".", "/")).exists()
                or (PACKAGE.parent / f"{node.module}.{alias.name}.py".replace(".", "/")).exists()
            )
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("tilth"))
    return frozenset(found)


def _graph() -> dict[str, frozenset[str]]:
    return {_module_name(p): _imports(p) for p in PACKAGE.rglob("*.py")}


def test_recording_never_imports_going_back() -> None:
    for path in (TIMELINE / "record").glob("*.py"):
        bad = {m for m in _imports(path) if m.startswith("tilth.timeline.rewind")}
        bad |= {m for m in _imports(path) if m == "tilth.timeline.controller"}
        assert not bad, f"{path.name} imports {sorted(bad)}"


def test_timeline_has_no_terminal_or_agent_code() -> None:
    for path in TIMELINE.rglob("*.py"):
        bad = {
            m
            for m in _imports(path)
            if m.startswith(("tilth.ui", "tilth.cli", "tilth.agent", "tilth.seed"))
        }
        assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"
        assert "importlib" not in path.read_text("utf-8"), path


def test_no_import_circles_in_the_timeline() -> None:
    graph = _graph()
    start = [m for m in graph if m.startswith("tilth.timeline")]

    def reach(origin: str) -> set[str]:
        seen: set[str] = set()
        todo = [m for m in graph.get(origin, ()) if m in graph]
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            todo.extend(m for m in graph.get(current, ()) if m in graph)
        return seen

    circles = [m for m in start if m in reach(m)]
    assert not circles, f"import circles through {circles}"


# Lower layers never import the ones above them (imports point down, front ends on top).
_BELOW: dict[str, tuple[str, ...]] = {
    "tilth.session": ("tilth.timeline", "tilth.tools", "tilth.agent", "tilth.chat", "tilth.ui"),
    "tilth.tools": ("tilth.timeline", "tilth.agent", "tilth.chat", "tilth.ui", "tilth.cli"),
    "tilth.agent": ("tilth.ui", "tilth.cli", "tilth.chat", "tilth.web", "tilth.runner"),
    "tilth.chat": ("tilth.ui", "tilth.cli", "tilth.web"),
}


def test_lower_layers_never_import_upper_ones() -> None:
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        for layer, above in _BELOW.items():
            if name == layer or name.startswith(layer + "."):
                bad = {m for m in _imports(path) if m.startswith(above)}
                assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"


def test_every_go_back_is_planned_by_the_one_planner() -> None:
    """Verbs hand a ``Target`` to ``planner.plan``; none builds a ``RewindPlan`` itself."""
    builders = []
    for path in PACKAGE.rglob("*.py"):
        for node in _nodes(path):
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("RewindPlan"):
                builders.append(str(path.relative_to(PACKAGE)))
    assert set(builders) == {"timeline/rewind/planner.py"}, builders


def test_only_the_executor_moves_a_worktree_back() -> None:
    """No go-back resets, cleans or stashes a worktree outside the journaled executor's
    steps (and the code restore they call): resume's unwind is the ``Unwind`` step."""
    going_back = {"reset_soft", "reset_hard", "clean_fd", "stash"}
    callers = set()
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "git.py":
            continue
        for node in _nodes(path):
            if isinstance(node, ast.Attribute) and node.attr in going_back:
                if ast.unparse(node.value) == "git":
                    callers.add(str(path.relative_to(PACKAGE)))
    assert callers == {"timeline/rewind/steps.py", "timeline/rewind/code_restore.py"}


def test_the_recorder_is_used_through_its_protocol() -> None:
    """``CheckpointRecorder`` is typed: no ``getattr`` probing of a recorder's members."""
    probes = []
    for path in PACKAGE.rglob("*.py"):
        for node in _nodes(path):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "getattr" and node.args:
                if "recorder" in ast.unparse(node.args[0]):
                    probes.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert probes == []


VERBS = {
    "tilth.timeline.rewind.fork",
    "tilth.timeline.rewind.undo",
    "tilth.timeline.rewind.restart",
    "tilth.timeline.rewind.seed_reset",
    "tilth.timeline.rewind.summarize",
    "tilth.timeline.rewind.code_only",
    "tilth.timeline.rewind.resume_prep",
    "tilth.timeline.rewind.planner",
    "tilth.timeline.rewind.targets",
    "tilth.timeline.controller",
    "tilth.attempts.pick",
}
"""The verbs (and the planner they feed): each builds a target or a plan."""


def test_the_executor_imports_no_verb() -> None:
    """The executor runs the journal over whatever steps a plan holds: it imports no verb,
    and neither does a step (a step applies itself with what it carries)."""
    modules = ["executor", "plan", "plan_record", "step_base", "steps", "history_steps"]
    modules += ["fork_steps", "undo_archive", "graft"]
    for name in modules:
        found = _imports(TIMELINE / "rewind" / f"{name}.py")
        assert not found & VERBS, f"{name}.py imports {sorted(found & VERBS)}"
    assert "tilth.timeline.rewind.plan" in _imports(TIMELINE / "rewind" / "executor.py")


def _own_fields(kind: type) -> list[str]:
    from dataclasses import fields

    inherited = {
        f.name
        for base in kind.__mro__[1:]
        for f in getattr(base, "__dataclass_fields__", {}).values()
    }
    return [f.name for f in fields(kind) if f.name not in inherited]


def test_no_go_back_plan_type_has_more_than_a_dozen_fields() -> None:
    """A go-back plan is a small header and small frozen steps, made from a small target:
    none holds more than a dozen fields of its own."""
    from tilth.attempts.pick import PickPlan
    from tilth.timeline.rewind import planner, steps, targets, undo
    from tilth.timeline.rewind.plan import RewindPlan

    kinds: list[type] = [RewindPlan, *steps.STEP_TYPES, targets.Target, targets.CodeGoal]
    kinds += [targets.HistoryGoal, targets.Extras, planner.CodePart, planner.HistoryPart]
    kinds += [undo.ArchivePart, PickPlan]
    assert len(steps.STEP_TYPES) >= 12
    for kind in kinds:
        own = _own_fields(kind)
        assert 0 < len(own) <= 12, f"{kind.__name__} has {len(own)} fields: {own}"
    for kind in steps.STEP_TYPES:
        assert kind.__dataclass_params__.frozen, kind.__name__  # type: ignore[attr-defined]
        assert kind.NAMES and set(kind.NAMES) <= set(steps.STEP_ORDER), kind.__name__


def test_every_journal_step_is_some_steps_own() -> None:
    """Each journal step name (but the executor's ``finish``) belongs to exactly one step."""
    from tilth.timeline.rewind import steps

    owners = [name for kind in steps.STEP_TYPES for name in kind.NAMES]
    assert sorted(owners) == sorted(n for n in steps.STEP_ORDER if n != "finish")


def test_a_plans_actions_are_its_steps() -> None:
    """No module sets a plan's actions by hand (``plan.archive = ...``): what a plan does
    is its steps, frozen, made by the planner; the old names are read-only views."""
    from tilth.timeline.rewind.plan import RewindPlan

    for name in ("head", "state", "threads", "fork", "graft", "archive", "before_seq"):
        assert isinstance(getattr(RewindPlan, name), property), name
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in _nodes(path):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr == "steps":
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert found == []
