"""Every way a run ends, as one typed family: the reasons, the ``Stop`` value, the signals.

A stop reason is one of ``STOP_REASONS`` (SPEC §4's ``stop`` event). Code that ends a task
or the run raises a ``StopSignal`` — ``TaskFailed`` for one task, ``StopRun`` for the whole
run — carrying its reason; the loop turns it into a ``Stop``, logs the ``stop`` event and
maps it to a session status and an exit code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from tilth.session.store import Status

StopReason = Literal[
    "all_done",
    "wall_clock",
    "token_cap",
    "iter_cap",
    "evaluator_cap",
    "empty_responses",
    "no_case",
    "interrupted",
    "error",
]
STOP_REASONS: tuple[str, ...] = get_args(StopReason)
FailureReason = StopReason | Literal["verify_cap", "evaluator_silent", "repeated_calls"]
"""Why one task failed: a stop reason, ``verify_cap`` (its checks failed too often),
``evaluator_silent`` (the evaluator kept answering without a verdict) or
``repeated_calls`` (the worker kept making the same failing call)."""
STOP_FOR_FAILURE: dict[str, StopReason] = {
    "verify_cap": "evaluator_cap",
    "evaluator_silent": "evaluator_cap",
    "repeated_calls": "no_case",
}
"""Task failures the ``stop`` event reports under SPEC §4's list: the objective checks
rejecting the work is a rejection, so ``verify_cap`` stops the run as ``evaluator_cap``
(its detail names ``TILTH_MAX_VERIFY_FAILURES_PER_TASK``); an evaluator that gives no
verdict stops it the same way, its detail naming the evaluator; a worker stuck repeating
a failing call made no case, so ``repeated_calls`` stops it as ``no_case`` (its detail
names ``TILTH_MAX_REPEATED_FAILURES``)."""
RESUMABLE_STOPS: tuple[StopReason, ...] = ("wall_clock", "token_cap", "interrupted")
CAP_SETTINGS: dict[str, str] = {
    "iter_cap": "TILTH_MAX_ITERATIONS_PER_TASK",
    "evaluator_cap": "TILTH_MAX_EVALUATOR_CALLS_PER_TASK",
    "verify_cap": "TILTH_MAX_VERIFY_FAILURES_PER_TASK",
    "repeated_calls": "TILTH_MAX_REPEATED_FAILURES",
    "wall_clock": "TILTH_MAX_WALL_CLOCK_MINUTES",
    "token_cap": "TILTH_MAX_TOKENS",
}


@dataclass(frozen=True)
class Stop:
    """How a run ended."""

    reason: StopReason
    detail: str = ""
    task_id: str | None = None
    error: BaseException | None = None

    @property
    def status(self) -> Status:
        """The session status this stop leaves behind."""
        if self.reason == "all_done":
            return "all_done"
        return "running" if self.reason in RESUMABLE_STOPS else "failed"

    @property
    def exit_code(self) -> int:
        """0 all done, 130 Ctrl-C, 1 error, 3 halted on a failed task or a cap."""
        return {"all_done": 0, "interrupted": 130, "error": 1}.get(self.reason, 3)


def stop_reason(text: str | None) -> StopReason:
    """``text`` as a stop reason; anything unknown is an ``error``."""
    for reason in get_args(StopReason):
        if reason == text:
            return reason
    return "error"


class StopSignal(Exception):
    """Raised to end a task or the run; ``reason`` becomes the ``stop`` reason."""

    def __init__(self, reason: FailureReason, detail: str = "", **fields: Any) -> None:
        super().__init__(detail or reason)
        self.reason: FailureReason = reason
        self.detail = detail or reason
        self.fields = fields


class TaskFailed(StopSignal):
    """A task-level failure (iter_cap, evaluator_cap, empty_responses, no_case...)."""


class StopRun(StopSignal):
    """A session-level stop (a cap hit, an interrupt)."""

    def __init__(self, reason: StopReason, detail: str = "") -> None:
        super().__init__(reason, detail)
        self.detail = detail
