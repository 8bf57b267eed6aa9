"""The stage pipelines by tier: which stages a task runs, in order (SPEC §6).

Shared by the run loop (what to run next) and the timeline (what a restart re-runs).
"""

from __future__ import annotations

import re

from tilth.session.task import Task

L1_STAGES = ("planning", "implementing", "code_review", "verifying")
L2_STAGES = (
    "brainstorming",
    "design_review",
    "planning",
    "implementing",
    "code_review",
    "verifying",
)
STAGES_BY_TIER = {"L1": L1_STAGES, "L2": L2_STAGES}


def stages_for(task: Task, default_tier: str) -> tuple[str, ...]:
    """The stage pipeline of ``task`` by its tier (or the default tier)."""
    tier = task.tier or default_tier
    return STAGES_BY_TIER.get(str(tier).upper(), L1_STAGES)


def stage_commit_message(task_id: str, stage: str) -> str:
    """The subject of a stage's commit (a contract: restart looks commits up by it)."""
    return f"task/{task_id}: complete {stage} stage"


STAGE_COMMIT = re.compile(r"task/(?P<task>T-\d+): complete (?P<stage>\S+) stage")
"""``stage_commit_message`` read back: the task and the stage of a stage commit's subject."""
