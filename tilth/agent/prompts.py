"""The prompts: package-data templates plus the briefs assembled from the session's channels.

The worker's brief is rebuilt from disk when a stage starts (never carried over
from an earlier stage's conversation): project context files, the progress
tail, the full plan, the task, earlier stage outputs and its own ledger. Never
``seed-meta.json``: it is the interview's audit trail for people (the third seed);
the worker's contract is ``prd.json`` and the seed tests. Paths are
workspace-relative; the session's absolute location is never shown to a model.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from tilth.agent.case import case_text, fence
from tilth.agent.seed_copies import files_at
from tilth.agent.verdict import REVIEWED_STAGE, format_ledger
from tilth.safe_read import try_read_text
from tilth.session.task import Task

CONTEXT_FILES_CAP = 8_000
PROGRESS_TAIL_LINES = 30
PROGRESS_CAP = 4_000
PLAN_CAP = 6_000
STAGE_OUTPUT_CAP = 6_000
LEDGER_LIMIT = 5
SEED_TEST_CAP = 6_000
GATE_OUTPUT_CAP = 4_000
DIFF_CAP = 12_000

STAGE_TITLES = {
    "brainstorming": "Brainstorm (design note)",
    "design_review": "Design review",
    "planning": "Plan",
    "implementing": "Implementation notes",
    "code_review": "Code review",
    "verifying": "Verification",
}


def load_prompt(name: str) -> str:
    """The packaged prompt ``prompts/<name>.md``."""
    return (resources.files("tilth.agent") / "prompts" / f"{name}.md").read_text("utf-8").strip()


def cap(text: str, limit: int, note: str = "truncated") -> str:
    """``text`` cut to ``limit`` characters with a visible note."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... [{note}, total {len(text)} chars]"


# ---- channels ----------------------------------------------------------------------------
def context_files(
    worktree: Path, names: tuple[str, ...], at: str | None = None
) -> tuple[str, list[str]]:
    """The project context files in the worktree root, combined and capped.

    With ``at`` (a commit), the files as that commit has them: the evaluator reads the
    context the user gave (the seed's), not one the worker rewrote (that is in the diff).
    """
    if at is not None:
        committed = files_at(at, names, worktree)
        found = [(name, committed[name].rstrip()) for name in names if name in committed]
    else:
        found = []
        for name in names:
            # A context file may be a link the model planted (to /proc/self/environ, a .env).
            text = try_read_text(worktree, name, CONTEXT_FILES_CAP * 4 + 1)
            if text is not None:
                found.append((name, text.rstrip()))
    if not found:
        return "", []
    if len(found) == 1:
        body = found[0][1]
    else:
        body = "\n\n".join(f"### {name}\n\n{text}" for name, text in found)
    loaded = [name for name, _ in found]
    return cap(body, CONTEXT_FILES_CAP, "project context truncated"), loaded


def progress_tail(path: Path) -> str:
    """The last lines of ``progress.txt`` ("" when there is none)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return ""
    text = "\n".join(line for line in lines[-PROGRESS_TAIL_LINES:] if line.strip())
    return text[-PROGRESS_CAP:]


def full_plan(prd: list[Task], current: str) -> str:
    """Every task, the current one as a one-line pointer."""
    parts = []
    for entry in prd:
        head = f"### {entry.id} — {entry.title}  [{entry.status}]"
        if entry.id == current:
            parts.append(head + "  ← your task (full detail below)")
            continue
        body = [head, entry.description.strip()]
        body += [f"- {ac}" for ac in entry.acceptance_criteria]
        parts.append("\n".join(line for line in body if line))
    return cap("\n\n".join(parts), PLAN_CAP, "full plan truncated")


def task_section(task: Task, test_files: list[str]) -> str:
    """The task itself: id, title, description, acceptance criteria, its seed tests."""
    lines = [
        f"**ID:** {task.id}",
        f"**Title:** {task.title}",
        "",
        task.description.strip(),
        "",
        "### Acceptance criteria",
        *[f"- {ac}" for ac in task.acceptance_criteria],
    ]
    if test_files:
        lines += ["", "### Acceptance tests", *[f"- `{name}`" for name in test_files]]
    return "\n".join(lines)


def format_output(stage: str, output: Any) -> str:
    """One stage's stored output as text."""
    if isinstance(output, str):
        return output.strip()
    if isinstance(output, dict):
        if "verdict" in output and isinstance(output["verdict"], str):
            text = f"Verdict: {output['verdict']} — {output.get('concern', '')}"
            if output.get("next_step"):
                text += f"\nNext step given: {output['next_step']}"
            return text
        if stage == "implementing" and isinstance(output.get("case"), dict):
            return case_text(output["case"])
        if "passed" in output:
            return f"Checks {'passed' if output['passed'] else 'FAILED'}: " + ", ".join(
                f"{c.get('name')} {'PASS' if c.get('passed') else 'FAIL'}"
                for c in output.get("checks") or []
            )
    return json.dumps(output, ensure_ascii=False, default=str)


def stage_outputs(
    outputs: dict[str, Any], stages: tuple[str, ...], before: str, skip: tuple[str, ...] = ()
) -> str:
    """Outputs of the stages that come before ``before``, in pipeline order, each fenced
    (a model wrote them: a heading in a plan must not open a section of the brief)."""
    parts = []
    for stage in stages:
        if stage == before:
            break
        if stage not in skip and outputs.get(stage) not in (None, ""):
            text = fence(cap(format_output(stage, outputs[stage]), STAGE_OUTPUT_CAP), "text")
            parts.append(f"### {STAGE_TITLES.get(stage, stage)}\n\n{text}")
    return "\n\n".join(parts)


def sections(*pairs: tuple[str, str]) -> str:
    """Markdown sections, each only when its body is non-empty."""
    return "\n\n".join(f"{head}\n\n{body}" for head, body in pairs if body.strip())


# ---- worker ------------------------------------------------------------------------------
def worker_system(stage: str) -> str:
    """The worker's system prompt for ``stage``."""
    return load_prompt("worker") + "\n\n" + load_prompt(f"stage_{stage}")


def worker_brief(
    *,
    task: Task,
    prd: list[Task],
    stage: str,
    stages: tuple[str, ...],
    outputs: dict[str, Any],
    ledger: list[dict[str, Any]],
    context: tuple[str, list[str]],
    progress: str,
    test_files: list[str],
    closing: str,
    attempt_note: str | None = None,
) -> str:
    """The first user message of a worker stage (``attempt_note``: which attempt this is)."""
    context_text, loaded = context
    body = sections(
        (f"## Project context ({', '.join(loaded)})", context_text),
        ("## Recent progress (last entries from progress.txt)", progress),
        (
            "## Full feature plan (all tasks — context, not work to do)",
            "Only the task under **Your task** is yours to build; the others are shown so you "
            "do not pre-empt or break them.\n\n" + full_plan(prd, task.id),
        ),
        ("## Your task", task_section(task, test_files)),
        ("## This attempt", attempt_note or ""),
        ("## Earlier stages of this task", stage_outputs(outputs, stages, stage)),
        (
            "## Prior iterations on this task (from the evaluator)",
            format_ledger(ledger[-LEDGER_LIMIT:], "").strip(),
        ),
    )
    footer = (
        f"You are in the **{stage}** stage (pipeline: {' → '.join(stages)}). "
        "All paths are relative to the workspace root, which is also where `bash` runs.\n\n"
        + closing
    )
    return body + "\n\n" + footer


# ---- evaluator ---------------------------------------------------------------------------
def evaluator_system(stage: str) -> str:
    """The evaluator's system prompt for a review stage."""
    return load_prompt("evaluator") + "\n\n" + load_prompt(f"review_{stage}")


def seed_tests_text(tests: dict[str, str]) -> str:
    """The seed test files (path → content), each as a path line and a fenced body, within
    a budget."""
    parts: list[str] = []
    budget = SEED_TEST_CAP
    for name, text in tests.items():
        if budget <= 0:
            parts.append(f"`{name}` (left out: the seed test budget is spent)")
            continue
        shown = cap(text, budget)
        budget -= len(shown)
        parts.append(f"`{name}`\n\n{fence(shown, 'python')}")
    return "\n\n".join(parts)


def evaluator_brief(
    *,
    task: Task,
    stage: str,
    stages: tuple[str, ...],
    outputs: dict[str, Any],
    ledger: list[dict[str, Any]],
    context: tuple[str, list[str]],
    work: str,
    seed_tests: str,
    gate_report: str,
    diff: str,
) -> str:
    """The one user message an evaluator call gets."""
    context_text, loaded = context
    criteria = "\n".join(f"- {ac}" for ac in task.acceptance_criteria)
    shown_diff = cap(diff, DIFF_CAP, "diff truncated") if diff.strip() else "(empty diff)"
    heading = f"# Task to evaluate: {task.id} — {task.title}"
    description = task.description.strip()
    body = sections(
        ("## Acceptance criteria", criteria),
        (f"## Project context ({', '.join(loaded)})", context_text),
        (
            "## Earlier stages of this task",
            # The work under review is shown on its own below, not twice.
            stage_outputs(outputs, stages, stage, skip=(REVIEWED_STAGE.get(stage, ""),)),
        ),
        ("## Prior iterations on this task", format_ledger(ledger[-LEDGER_LIMIT:], "").strip()),
        ("## The work under review", work),
        ("## Seed acceptance tests (the tests the harness ran)", seed_tests),
        ("## Test output", gate_report),  # capped per check by its maker, fences intact
        ("## Diff (the task's cumulative changes since it started)", fence(shown_diff, "diff")),
    )
    # The heading stands even without a description: the reviewer must know which task it is.
    head = heading + (f"\n\n{description}" if description else "")
    closing = f"You are reviewing at **{stage}**. Respond with one `submit_verdict` call."
    return f"{head}\n\n{body}\n\n{closing}"
