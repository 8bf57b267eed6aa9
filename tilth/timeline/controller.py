"""The one timeline API every front end drives: the CLI, ``tilth chat`` and ``tilth serve``.

A front end never plans or restores anything itself; it asks the controller for a
plan (``plan.render()`` is the dry-run and confirmation text, ``plan.to_dict()`` the
JSON a web API returns), shows it, and hands it back to ``execute``. Writes happen
inside ``writing()``, which holds the session lock and first finishes any operation a
crash interrupted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilth.config import Settings, load_settings
from tilth.errors import SessionLocked
from tilth.model.base import Model
from tilth.session.live_run import stop_live_run
from tilth.session.store import Session
from tilth.session.task import Task
from tilth.timeline.record.checkpoints import (
    Checkpoint,
    TimelineRead,
    read_timeline,
    resolve_checkpoint,
)
from tilth.timeline.record.dir_state import is_manifest_head
from tilth.timeline.rewind.executor import (
    complete_own_fork,
    execute_rewind,
    open_for_writing,
    recover,
)
from tilth.timeline.rewind.fork import ForkResult, fork_result, plan_fork
from tilth.timeline.rewind.plan import SCOPES, RewindPlan
from tilth.timeline.rewind.planner import plan_rewind, plan_undo
from tilth.timeline.rewind.restart import plan_restart
from tilth.timeline.rewind.resume_prep import plan_resume
from tilth.timeline.rewind.seed_reset import plan_reset_to_seed, preflight
from tilth.timeline.rewind.summarize import SummaryPlan, SummaryResult, plan_summary, summarize


@dataclass(frozen=True)
class ExecuteResult:
    """What one carried-out plan did."""

    op: str
    op_id: str
    session_id: str
    target: str
    new_session_id: str | None = None
    """A fork: the new session's id."""
    undo_point: str | None = None
    """The ``before-`` checkpoint ``tilth rewind --undo`` returns to (None: not undoable)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "op_id": self.op_id,
            "session_id": self.session_id,
            "target": self.target,
            "new_session_id": self.new_session_id,
            "undo_point": self.undo_point,
        }


class TimelineController:
    """Checkpoints, rewind, restart, reset to the seed, fork, undo, resume's preparation
    and summarize for one session. Plan while holding ``writing()`` and execute in the
    same block."""

    SCOPES = SCOPES
    """The scopes of a rewind: ``both``, ``code``, ``conversation``."""

    def __init__(self, session: Session, settings: Settings | None = None) -> None:
        self.session = session
        self._settings = settings

    @property
    def settings(self) -> Settings:
        """The settings given, else loaded when first needed (a restart's default tier, a
        fork's set-up): resume's preparation and undo need none."""
        if self._settings is None:
            self._settings = load_settings()
        return self._settings

    @contextmanager
    def writing(self, notify: Callable[[str], Any] | None = None) -> Iterator[None]:
        """Hold the session lock (recovering an interrupted operation first)."""
        with open_for_writing(self.session, notify):
            yield

    def recover(self) -> str | None:
        """Finish (or cancel) an operation a crash interrupted, this session's own or, for a
        fork a crash left half-made, its parent's (which completes it), unless a live run
        holds the lock (then nothing is touched); a sentence for the user, or None."""
        said: list[str] = []
        try:
            complete_own_fork(self.session, said.append)
        except SessionLocked:
            pass  # the parent is busy: its own next command completes the fork
        try:
            with self.session.lock():
                message = recover(self.session)
        except SessionLocked:
            message = None
        if message:
            said.append(message)
        return "; ".join(said) or None

    def complete_fork(self, notify: Callable[[str], Any] | None = None) -> None:
        """If this session is a fork a crash interrupted, complete it from its parent's
        journal (``writing()`` does this first too)."""
        complete_own_fork(self.session, notify)

    def checkpoints(self) -> TimelineRead:
        """Every checkpoint, oldest first, plus the files that could not be read."""
        return read_timeline(self.session)

    def resolve(self, ref: str) -> Checkpoint:
        """The checkpoint ``ref`` names: an id, a number, seed, latest, T-001, T-001/stage."""
        return resolve_checkpoint(self.session, ref)

    # ---- plans (pure: nothing is written) --------------------------------------------------
    def plan_rewind(
        self, target: Checkpoint, scope: str, force: bool = False, *, survey: bool = False
    ) -> RewindPlan:
        """What rewinding to ``target`` in ``scope`` would change. Planning reads only the
        files the rewind writes; ``survey`` also walks the worktree to list every edit made
        since the latest recorded state (for a person to read: a dry run, a confirmation)."""
        return plan_rewind(self.session, target, scope, force=force, survey=survey)

    def plan_restart(self, task_id: str, from_stage: str | None = None) -> RewindPlan:
        """What restarting ``task_id`` (from ``from_stage``) would change."""
        return plan_restart(self.session, task_id, from_stage, self.settings.default_tier)

    def plan_reset_to_seed(self) -> RewindPlan:
        """What ``reset --to-seed`` would change (its pre-flight checks raise first)."""
        return plan_reset_to_seed(self.session, preflight(self.session))

    def plan_fork(self, target: Checkpoint) -> RewindPlan:
        """The new session a fork at ``target`` would make (this one is never changed)."""
        # A fork lives beside its parent.
        return plan_fork(self.session, target, self.session.dir.parent)

    def plan_undo(self, ref: str | None = None, *, survey: bool = False) -> RewindPlan:
        """Going back to the state before the last go-back (or the undo point ``ref``);
        ``survey`` as for ``plan_rewind``."""
        return plan_undo(self.session, ref, survey=survey)

    def plan_resume(
        self,
        worktree: Path,
        prd: tuple[Task, ...] | None,
        placeholder: str | None,
        *,
        headline: str,
        event: dict[str, Any],
    ) -> RewindPlan:
        """Resume's preparation: ``prd`` (None: unchanged) becomes the tasks' list, the
        FAILED ``placeholder`` commit (None: none) is soft-reset, ``event`` logged."""
        return plan_resume(self.session, worktree, prd, placeholder, headline=headline, event=event)

    # ---- carrying a plan out ----------------------------------------------------------------
    def execute(self, plan: RewindPlan) -> ExecuteResult:
        """Carry out a plan, crash-safely; a fork's result names the new session."""
        execute_rewind(self.session, plan)
        return ExecuteResult(
            op=plan.op,
            op_id=plan.op_id,
            session_id=self.session.id,
            target=plan.target,
            new_session_id=str(plan.fork["child"]) if plan.fork else None,
            undo_point=f"cp-{plan.before_seq:04d}" if plan.before_seq is not None else None,
        )

    def fork(
        self, target: Checkpoint, *, on_progress: Callable[[str], Any] | None = None
    ) -> ForkResult:
        """A new session whose state equals ``target``; this one is left untouched.

        The new worktree is then made ready as every new worktree is (submodules,
        ``TILTH_SETUP_COMMAND``; ``on_progress`` hears the command start): a failing
        set-up raises ``SetupFailed`` naming the new session, which is kept as made.
        """
        return self.execute_fork(self.plan_fork(target), on_progress=on_progress)

    def execute_fork(
        self, plan: RewindPlan, *, on_progress: Callable[[str], Any] | None = None
    ) -> ForkResult:
        """Carry out a ``plan_fork`` plan (shown first), then set up the new worktree as
        ``fork`` does: the one way every front end forks."""
        from tilth.environment.worktree_setup import set_up_fork
        from tilth.tools.sandbox import confinement

        self.execute(plan)
        result = fork_result(self.session, plan)
        result.notes = set_up_fork(
            result.session,
            result.worktree,
            self.settings,
            confine=confinement(self.settings, result.session),
            chat=is_manifest_head(result.checkpoint.head),
            on_progress=on_progress,
        )
        return result

    def plan_summary(
        self, target: Checkpoint, direction: str, thread_key: str | None = None
    ) -> SummaryPlan:
        """Which messages ``summarize`` would replace (no model call, nothing written)."""
        return plan_summary(self.session, target, direction, thread_key=thread_key)

    def summarize(
        self,
        target: Checkpoint,
        direction: str,
        model: Model,
        thread_key: str | None = None,
    ) -> SummaryResult:
        """Replace the part of a thread before (``up-to``) or after (``from``) ``target``."""
        return summarize(self.session, target, direction, model, thread_key=thread_key)

    def stop_run(self) -> int | None:
        """Stop a live run of this session (Ctrl-C to its pid, then wait); its pid or None."""
        return stop_live_run(self.session)
