"""Getting a stopped session ready to run again: failed tasks retried, placeholder unwound.

The placeholder commit a failed task leaves (``T-NNN: FAILED (<reason>): <title>``)
holds the task's partial work. Resuming soft-resets it, so that work is back in the
index and the retry's diff is cumulative — the evaluator sees everything the task
changed, not only what changed after the failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilth import git
from tilth.session.store import Session
from tilth.timeline.controller import TimelineController
from tilth.timeline.rewind.plan import RewindPlan

FAILED_SUBJECT = re.compile(r"^(?P<task>T-\d{3,}): FAILED \((?P<reason>[a-z_]+)\)")


def failed_subject(task_id: str, reason: str, title: str) -> str:
    """The subject of the placeholder commit a failed task leaves behind."""
    return f"{task_id}: FAILED ({reason}): {' '.join(title.split())}"


@dataclass(frozen=True)
class ResumePlan:
    """What ``tilth resume`` found and changed before re-entering the loop."""

    last_stop: str | None
    retried: list[str]
    """Tasks that were ``failed`` and are ``pending`` again."""
    pending: list[str]
    """Other tasks still to do (an ``in_progress`` one first)."""
    unwound_commit: str | None
    """Sha of the FAILED placeholder that was soft-reset, if any."""
    continuing: tuple[str, ...] = ()
    """Of ``pending``, the tasks stopped mid-way (``in_progress``): they continue where
    they left off rather than start."""

    @property
    def text(self) -> str:
        """The plan in one line, for the terminal and the event."""
        bits = []
        if self.retried:
            bits.append(f"retrying {', '.join(self.retried)} (was: failed)")
            if self.pending:
                bits.append(f"then: {', '.join(self.pending)}")
        elif self.continuing:
            bits.append(f"continuing {', '.join(self.continuing)} (in progress)")
            rest = [t for t in self.pending if t not in self.continuing]
            if rest:
                bits.append(f"then: {', '.join(rest)}")
        elif self.pending:
            bits.append(f"pending: {', '.join(self.pending)}")
        else:
            bits.append("no failed or pending tasks; nothing to do")
        if self.last_stop:
            bits.append(f"last stop: {self.last_stop}")
        if self.unwound_commit:
            bits.append(f"unwound FAILED placeholder commit {self.unwound_commit[:10]}")
        return "; ".join(bits)

    def event_payload(self) -> dict[str, Any]:
        return {
            "last_stop": self.last_stop,
            "retried": self.retried,
            "pending": self.pending,
            "unwound_commit": self.unwound_commit is not None,
            "unwound_sha": self.unwound_commit,
            "plan": self.text,
        }


def plan_resume(session: Session, worktree: Path) -> tuple[ResumePlan, RewindPlan]:
    """What resuming will change before the loop re-enters (no writes): failed tasks back
    to pending, the FAILED placeholder soft-reset. One more go-back, planned through the
    timeline controller like every other."""
    tasks = session.tasks()
    retried = [t.id for t in tasks if t.status == "failed"]
    flipped = [t.with_status("pending") if t.status == "failed" else t for t in tasks]
    open_ids = {t.id for t in flipped if t.is_open}
    placeholder = failed_placeholder(worktree, open_ids) if open_ids else None
    ordered = [t for t in flipped if t.status == "in_progress"] + [
        t for t in flipped if t.status == "pending"
    ]
    pending = [t.id for t in ordered if t.id not in retried]
    continuing = tuple(t.id for t in ordered if t.status == "in_progress")
    resume = ResumePlan(session.last_stop(), retried, pending, placeholder, continuing)
    rewind_plan = TimelineController(session).plan_resume(
        worktree,
        tuple(flipped) if retried else None,
        placeholder,
        headline=f"resume session {session.id}: {resume.text}",
        event={
            "type": "session_resume",
            "payload": {"session_id": session.id, **resume.event_payload()},
        },
    )
    return resume, rewind_plan


def failed_placeholder(worktree: Path, task_ids: set[str]) -> str | None:
    """HEAD's sha when it is the FAILED placeholder of one of ``task_ids`` (and has a parent)."""
    match = FAILED_SUBJECT.match(git.subject("HEAD", worktree))
    if match is None or match["task"] not in task_ids:
        return None
    if git.rev_parse("HEAD^", worktree) is None:
        return None
    return git.head(worktree)


def log_finished_resume(session: Session) -> ResumePlan:
    """Resuming a session whose tasks are all done changes nothing but is still logged
    (the second seed: "no-op (besides logging)"): ``session_resume`` with ``last_stop``
    ``all_done`` and the one-line plan."""
    resume = ResumePlan("all_done", [], [], None)
    with session.lock():
        session.log("session_resume", session_id=session.id, **resume.event_payload())
    return resume


def prepare_resume(session: Session, worktree: Path) -> ResumePlan:
    """Flip failed tasks to pending, unwind the placeholder, and log ``session_resume``:
    planned and carried out through the timeline controller, journaled (the caller holds
    the lock)."""
    resume, rewind_plan = plan_resume(session, worktree)
    TimelineController(session).execute(rewind_plan)
    return resume
