"""The one timeline API every front end drives: the CLI now, chat and the web UI later.

A front end never plans or restores anything itself; it asks the controller for a
plan (the dry-run and confirmation text), shows it, and hands it back to execute.
Writes happen inside ``writing()``, which holds the session lock and first finishes
any operation a crash interrupted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tilth.config import Settings
from tilth.session.store import Session
from tilth.timeline.record.checkpoints import (
    Checkpoint,
    TimelineRead,
    read_timeline,
    resolve_checkpoint,
)
from tilth.timeline.record.dir_state import is_manifest_head
from tilth.timeline.rewind.executor import execute_rewind, open_for_writing
from tilth.timeline.rewind.fork import fork_session
from tilth.timeline.rewind.plan import RewindPlan
from tilth.timeline.rewind.planner import plan_rewind
from tilth.timeline.rewind.restart import plan_restart
from tilth.timeline.rewind.snapshot_fork import fork_snapshot_session
from tilth.timeline.rewind.summarize import summarize

if TYPE_CHECKING:
    from tilth.model.base import Model
    from tilth.timeline.rewind.fork import ForkResult
    from tilth.timeline.rewind.summarize import SummaryResult


class TimelineController:
    """Checkpoints, rewind, restart, fork and summarize for one session."""

    def __init__(self, session: Session, settings: Settings) -> None:
        self.session = session
        self.settings = settings

    @contextmanager
    def writing(self, notify: Callable[[str], Any] | None = None) -> Iterator[None]:
        """Hold the session lock (recovering an interrupted operation first)."""
        with open_for_writing(self.session, notify):
            yield

    def checkpoints(self) -> TimelineRead:
        """Every checkpoint, oldest first, plus the files that could not be read."""
        return read_timeline(self.session)

    def resolve(self, ref: str) -> Checkpoint:
        """The checkpoint ``ref`` names: an id, a number, seed, latest, T-001, T-001/stage."""
        return resolve_checkpoint(self.session, ref)

    def plan_rewind(self, target: Checkpoint, scope: str, *, force: bool = False) -> RewindPlan:
        """What rewinding to ``target`` in ``scope`` would change (writes nothing)."""
        return plan_rewind(self.session, target, scope, force=force)

    def plan_restart(self, task_id: str, from_stage: str | None) -> RewindPlan:
        """What restarting ``task_id`` (from ``from_stage``) would change (writes nothing)."""
        return plan_restart(self.session, task_id, from_stage, self.settings.default_tier)

    def execute(self, plan: RewindPlan) -> None:
        """Carry out a rewind or restart plan, crash-safely."""
        execute_rewind(self.session, plan)

    def fork(self, target: Checkpoint) -> ForkResult:
        """A new session whose state equals ``target``; this one is left untouched."""
        if is_manifest_head(target.head):
            # A chat: the fork gets a directory of its own (rewind.snapshot_fork).
            return fork_snapshot_session(self.session, target, self.settings.sessions_dir)
        return fork_session(self.session, target, self.settings.sessions_dir)

    def summarize(
        self,
        target: Checkpoint,
        direction: str,
        model: Model,
        *,
        thread_key: str | None = None,
    ) -> SummaryResult:
        """Replace the part of a thread before (``up-to``) or after (``from``) ``target``."""
        return summarize(self.session, target, direction, model, thread_key=thread_key)
