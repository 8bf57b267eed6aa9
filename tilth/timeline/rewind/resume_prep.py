"""Resume's preparation as a go-back: failed tasks pending again, the placeholder unwound.

``tilth resume`` (``agent.resume``) decides which tasks it retries and whether HEAD is a
FAILED placeholder; this verb turns that into a target the one planner plans and the one
executor runs, journaled and undoable, like every other go-back
(``TimelineController.plan_resume``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tilth import git
from tilth.session.store import Session
from tilth.session.task import Task
from tilth.timeline.record.state_capture import read_harness_state
from tilth.timeline.rewind.plan import RewindPlan
from tilth.timeline.rewind.planner import plan
from tilth.timeline.rewind.targets import Extras, HistoryGoal, Target


def resume_target(
    session: Session,
    worktree: Path,
    prd: tuple[Task, ...] | None,
    placeholder: str | None,
    *,
    headline: str,
    event: dict[str, Any],
) -> Target:
    """Resuming as a target: ``prd`` (None: unchanged) becomes the tasks' list, the
    ``placeholder`` commit (None: none) is soft-reset to its parent, ``event`` is logged.
    Undoable when it changes something."""
    state = None
    if prd is not None:
        # The pipeline sees the task's recorded failure and starts a fresh attempt itself.
        state = read_harness_state(session).with_prd(prd).to_dict()
    return Target(
        op="resume",
        ref=git.head(worktree)[:12],
        label="resume",
        scope="both",
        headline=headline,
        history=HistoryGoal(state=state),
        extras=Extras(
            unwind=git.rev_parse(f"{placeholder}^", worktree) if placeholder else None,
            undoable=prd is not None or placeholder is not None,
        ),
        event=event,
    )


def plan_resume(
    session: Session,
    worktree: Path,
    prd: tuple[Task, ...] | None,
    placeholder: str | None,
    *,
    headline: str,
    event: dict[str, Any],
) -> RewindPlan:
    """What resume's preparation changes (no writes)."""
    target = resume_target(session, worktree, prd, placeholder, headline=headline, event=event)
    return plan(session, target)
