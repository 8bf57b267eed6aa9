"""Per-task harness state (``tasks/<T-NNN>.json``): base commit, stage progress, outputs.

Written atomically after every step, so a checkpoint can snapshot it and a
resume (or a rewind followed by a resume) knows exactly where the task stood.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tilth.session.files import atomic_write_json
from tilth.session.records import read_task_state
from tilth.session.schemas import SCHEMAS
from tilth.session.store import Session

TASK_STATE_SCHEMA = SCHEMAS["task"]


@dataclass
class TaskState:
    """Where one task stands."""

    task_id: str
    base_commit: str | None = None
    """HEAD when the task started; a full restart resets here."""
    stages_done: list[str] = field(default_factory=list)
    """Completed stages, in order."""
    current_stage: str | None = None
    outputs: dict[str, Any] = field(default_factory=dict)
    """stage → its output (brainstorm text, plan, review verdict, notes, test results)."""
    stage_commits: dict[str, str] = field(default_factory=dict)
    """stage → sha of its ``task/<T>: complete <stage> stage`` commit."""
    rejections: int = 0
    """Evaluator rejections in this attempt (for the evaluator cap)."""
    review_rejections: dict[str, int] = field(default_factory=dict)
    """review stage → its share of ``rejections`` (a restart forgets the stages it re-runs)."""
    verify_failures: int = 0
    """Verifying stages that failed in this attempt (for the verify cap)."""
    feedback: str | None = None
    """The latest rejection feedback, waiting for the stage it sends the task back to."""
    turns: int = 0
    """Worker turns taken in this attempt (for the iteration cap)."""
    failure: str | None = None
    """Why the last attempt failed; the next ``run_task`` starts a fresh attempt."""
    schema: int = TASK_STATE_SCHEMA

    @classmethod
    def path(cls, session: Session, task_id: str) -> Path:
        return session.tasks_dir / f"{task_id}.json"

    @classmethod
    def load(cls, session: Session, task_id: str) -> TaskState:
        """The stored state, or a fresh one when the task never started."""
        data = read_task_state(cls.path(session, task_id), task_id)
        if data is None:
            return cls(task_id)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def save(self, session: Session) -> None:
        atomic_write_json(self.path(session, self.task_id), asdict(self))
