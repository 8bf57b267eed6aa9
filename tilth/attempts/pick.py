"""``tilth attempts --pick <session>``: another attempt in the winner's place.

A pick is a go-back: the parent is rewound (code and conversation, through the one
planner and journal, so it is undoable with ``tilth rewind --undo``) to the task's
start, the attempt whose fork point that was, and the picked attempt's work is then
grafted as a winner's is, as steps of the same journaled plan (a crash half-way is
finished by the next command that takes the session). Tasks after it are rolled back
with it (the plan says so) and run again on ``tilth resume``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilth import git
from tilth.attempts.listing import list_attempts
from tilth.attempts.task import attempt_record, placeholder_of
from tilth.errors import UsageError
from tilth.session.store import Session
from tilth.timeline.controller import TimelineController
from tilth.timeline.record.checkpoints import Checkpoint
from tilth.timeline.rewind.graft import graft_spec
from tilth.timeline.rewind.plan import RewindPlan
from tilth.timeline.rewind.steps import Graft


@dataclass
class PickPlan:
    """What picking ``child`` would do: the rewind, then the graft."""

    parent: Session
    child: Session
    task_id: str
    start: Checkpoint
    rewind: RewindPlan
    figures: list[dict[str, Any]]

    def render(self, undo: str | None = None) -> str:
        """The plan a person confirms (the rewind's own plan, then the graft)."""
        how = undo or f"`tilth rewind {self.parent.id} --undo`"
        return (
            f"pick attempt {self.child.id} for {self.task_id} in session {self.parent.id}:\n"
            f"{self.rewind.render(how)}\n"
            f"then: {self.child.id}'s commits, task state, ledger, threads and checkpoints "
            f"for {self.task_id} are brought in (undo: {how})"
        )

    def to_dict(self) -> dict[str, Any]:
        """The plan as data (the web API)."""
        return {
            "op": "pick",
            "task_id": self.task_id,
            "attempt": self.child.id,
            "start": self.start.id,
            "rewind": self.rewind.to_dict(),
        }


def plan_pick(controller: TimelineController, picked: str) -> PickPlan:
    """Plan putting attempt ``picked`` in its task's winner's place (nothing written)."""
    parent = controller.session
    child = Session(picked, parent.dir.parent / picked)
    record = attempt_record(child) if child.dir.is_dir() else {}
    if record.get("parent") != parent.id:
        raise UsageError(
            f"{picked} is not an attempt of session {parent.id}",
            hint=f"`tilth attempts {parent.id}` lists them",
        )
    task_id = str(record.get("task_id"))
    rows = [r for r in list_attempts(parent, task_id) if r.figures]
    if not any(r.session == picked for r in rows):
        raise UsageError(
            f"attempt {picked} has not been decided yet: the run stopped before its task's "
            "attempts were over, so there is no winner to replace",
            hint=f"`tilth resume {parent.id}` runs them on and chooses; pick after that",
        )
    if any(r.session == picked and r.state == "winner" for r in rows):
        raise UsageError(f"attempt {picked} is already the winner of {task_id}")
    start = controller.resolve(str(record.get("checkpoint")))
    rewind = controller.plan_rewind(start, "both", survey=True)
    figures = [{"session": r.session, **{k: v for k, v in r.figures.items()}} for r in rows]
    rewind = rewind.adding(Graft(_graft(child, task_id, start, figures)))
    return PickPlan(parent, child, task_id, start, rewind, figures)


def _graft(
    child: Session, task_id: str, start: Checkpoint, figures: list[dict[str, Any]]
) -> dict[str, Any]:
    """The graft that follows the rewind: the picked attempt's work and the new choice."""
    picked = next(f for f in figures if f["session"] == child.id)
    after: list[dict[str, Any]] = []
    # A failed attempt comes with its FAILED placeholder: the task is failed here too, and
    # resume unwinds the placeholder as it does after any failed task.
    placeholder = placeholder_of(child, task_id)
    if placeholder is not None:
        after.append(
            {
                "type": "task_failed",
                "payload": {
                    "task_id": task_id,
                    "reason": picked.get("failure") or "no_case",
                    "placeholder_sha": placeholder,
                    "picked": child.id,
                },
            }
        )
    chosen = [
        {
            **item,
            "reason": "picked by hand"
            if item["session"] == child.id
            else f"not picked ({item.get('reason', '')})",
        }
        for item in figures
    ]
    selected = {
        "task_id": task_id,
        "winner": child.id,
        "checkpoint": start.id,
        "picked": True,
        "attempts": chosen,
    }
    after.append({"type": "attempt_selected", "payload": selected})
    return graft_spec(
        child,
        task_id,
        start.seq,
        git.head(child.workspace_dir),
        status="done" if picked.get("passed") else "failed",
        tokens=sum(int(f.get("tokens") or 0) for f in figures),
        after=after,
    )


def execute_pick(controller: TimelineController, plan: PickPlan) -> None:
    """Carry out ``plan`` (hold ``controller.writing()``): the rewind, then the graft, as
    one journaled operation."""
    controller.execute(plan.rewind)
