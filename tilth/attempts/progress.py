"""What is known so far of an attempt no ``attempt_selected`` has decided yet: whether it
runs now or why it stopped, its stage and turns, the tokens it spent since its fork and
whether its gate passed so far.

These are read from the attempt's own files (its record, task state and events), and kept
apart from a decided attempt's figures (``AttemptRow.figures``): ``--pick`` and the choice
treat a row with figures as decided, so what an undecided attempt has done so far never
passes for them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from tilth.agent.task_state import TaskState
from tilth.errors import TilthError
from tilth.session.events import payloads_of
from tilth.session.store import Session

RUNNING, UNDECIDED, DELETED, QUEUED = "running", "undecided", "deleted", "queued"


@dataclass(frozen=True)
class SoFar:
    """An undecided attempt's progress (``tilth attempts --json`` key ``so_far``)."""

    status: str
    """``running`` (a process drives it now), ``queued`` (the run goes on but this one waits
    for a place: ``--parallel`` below ``--attempts``), ``stopped: <reason>`` (a cap,
    Ctrl-C...), ``undecided`` (its task is over or it never ran; the choice waits for the
    others) or ``deleted`` (its session is gone)."""
    stop_reason: str | None
    """Its newest stop's reason, if it stopped."""
    task_status: str | None
    """Its task's status in the attempt (``pending``, ``in_progress``, ``done``, ``failed``)."""
    stage: str | None
    """The stage it is at (the last one it finished, once its task is over)."""
    stages_done: int
    turns: int
    """Worker turns it took at the task."""
    tokens: int
    """Tokens it spent since its fork."""
    gate_passed: bool | None
    """Whether its latest gate (seed tests, ratchet) passed; None: none has run yet."""
    failed_gates: int
    """Gate runs that failed so far."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, with ``summary``: the one line the listing and the web UI show."""
        return {**asdict(self), "summary": self.describe()}

    def describe(self) -> str:
        """One line for the listing's "why" column and the web UI."""
        over = self.status == UNDECIDED and self.task_status in ("done", "failed")
        if over:
            parts = [f"its task {self.task_status}, waiting for the other attempts"]
        else:
            parts = [_WORDS.get(self.status, self.status)]
        if self.stage:
            parts.append(f"at {self.stage}")
        parts.append(f"{self.turns} turn(s)")
        gate = {True: "passed", False: "failed", None: "not run yet"}[self.gate_passed]
        parts.append(
            f"gate {gate}" + (f" ({self.failed_gates} failed)" if self.failed_gates else "")
        )
        parts.append(f"{self.tokens:,} token(s) so far")
        return "undecided: " + ", ".join(parts)


_WORDS = {UNDECIDED: "not running", QUEUED: "queued, waiting for a place (--parallel)"}


def so_far(attempt: Session, task_id: str, base_tokens: int, run_on: bool = False) -> SoFar:
    """What ``attempt`` has done at ``task_id`` since its fork, at ``base_tokens``;
    ``run_on``: a process drives the run that forked it (one not started yet is queued)."""
    if not attempt.dir.is_dir():
        return SoFar(DELETED, None, None, None, 0, 0, 0, None, 0)
    try:
        return _read(attempt, task_id, base_tokens, run_on)
    except (OSError, TilthError):  # being deleted or damaged: its status only
        return SoFar(_status(attempt, None, None, run_on), None, None, None, 0, 0, 0, None, 0)


def _read(attempt: Session, task_id: str, base_tokens: int, run_on: bool) -> SoFar:
    task_status = next((t.status for t in attempt.tasks() if t.id == task_id), None)
    state = TaskState.load(attempt, task_id)
    stop = attempt.last_stop()
    passed: bool | None = None
    failed = 0
    for payload in payloads_of(attempt.events.path, "tests_run"):
        if payload.get("task_id") == task_id:
            passed = bool(payload.get("passed"))
            failed += 0 if passed else 1
    stage = state.current_stage or (state.stages_done[-1] if state.stages_done else None)
    return SoFar(
        status=_status(attempt, stop, task_status, run_on),
        stop_reason=stop,
        task_status=task_status,
        stage=stage,
        stages_done=len(state.stages_done),
        turns=state.turns,
        tokens=max(0, attempt.tokens_used - base_tokens),
        gate_passed=passed,
        failed_gates=failed,
    )


def _status(attempt: Session, stop: str | None, task_status: str | None, run_on: bool) -> str:
    _, alive = attempt.lock().owner()
    if alive:
        return RUNNING
    if task_status in ("done", "failed"):
        return UNDECIDED
    if stop is None:
        return QUEUED if run_on else UNDECIDED
    return f"stopped: {stop}"
