"""Running a task's attempts K at a time on the durable queue, each in its own lane of
the run's progress (``progress_sinks.lanes_for``: a live block on a terminal).

``runner.drive`` hands itself in (``Drive``), so this package never imports the runner:
the queue's workflows call back into the same ``drive`` a plain run uses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from tilth.agent.progress_sinks import LaneProgress, LineNotices, lanes_for
from tilth.agent.run_context import Notices, Progress
from tilth.agent.stops import Stop
from tilth.attempts.task import KIND, AttemptsRunner, attempt_record, task_over
from tilth.config import Settings, load_settings
from tilth.model.base import Model
from tilth.session.store import Session

STOP_SECONDS = 60.0
"""How long an interrupted run waits for its attempts to save their state and stop."""


class Drive(Protocol):
    """``tilth.runner.drive``."""

    def __call__(
        self,
        session: Session,
        settings: Settings,
        out: Notices,
        *,
        resume: bool,
        models: tuple[Model, Model] | None = ...,
        progress: Progress | None = ...,
        started: float | None = ...,
    ) -> Stop: ...


def ended_as(child: Session, stop: Stop) -> str:
    """How an attempt's run ended, in a few words: its task's outcome, or why it stopped."""
    task_id = attempt_record(child).get("task_id")
    status = next((t.status for t in child.tasks() if t.id == task_id), None)
    if status == "done":
        return f"✓ {task_id} passed"
    if status == "failed":
        return f"✗ {task_id} failed"
    return f"stopped ({stop.reason})"


def as_result(stop: Stop) -> dict[str, Any]:
    """A stop as the workflow's JSON result."""
    return {"reason": stop.reason, "detail": stop.detail}


def attempt_note(session: Session) -> str | None:
    """What the worker of an attempt session is told about it (None for other sessions)."""
    record = attempt_record(session)
    if session.record().kind != KIND or not record:
        return None
    return (
        f"You are attempt {record.get('number')} of {record.get('of')} at this task. The "
        "other attempts work on it independently from the same start; the best by the "
        "checks (tests, review, fewer failed gates, smaller diff) is kept."
    )


def attempts_runner(
    session: Session,
    settings: Settings,
    drive: Drive,
    *,
    models: tuple[Model, Model] | None,
    shown: Progress,
    started: float | None = None,
) -> AttemptsRunner:
    """The task runner of a best-of-``settings.attempts`` run of ``session``.

    ``started`` is when the run began: its wall-clock cap holds for the attempts it drives
    here, so one that waited for a place in the queue does not get a fresh clock."""
    cancel = threading.Event()

    def run_all(children: Iterator[Session]) -> list[Any]:
        from tilth.attempts import engine, retention

        parallel = settings.parallel or settings.attempts
        engine.launch(settings, default_driver(drive), parallel=parallel)
        with lanes_for(shown) as lanes:
            ids = []
            try:
                for child in children:  # each is queued as soon as it is made
                    record = attempt_record(child)
                    label = (
                        f"attempt {record.get('number', '?')}/{record.get('of', '?')} {child.id}"
                    )
                    lane = lanes.add(label, cancel)

                    def local(child: Session = child, lane: LaneProgress = lane) -> dict[str, Any]:
                        lane.begin()
                        out = LineNotices(None)
                        stop = drive(
                            child,
                            settings,
                            out,
                            resume=True,
                            models=models,
                            progress=lane,
                            started=started,
                        )
                        lane.end(ended_as(child, stop))
                        return as_result(stop)

                    again = not task_over(child)
                    ids.append(engine.enqueue_attempt(child, local=local, again=again))
                results = engine.wait(ids)
                retention.tidy(settings)  # all ended: finished workflows of earlier runs go
                return results
            except KeyboardInterrupt:
                # Each attempt queued so far (a Ctrl-C may come while the next is forked) stops
                # at its next step with its state saved (resume continues it).
                cancel.set()
                engine.wait(ids, seconds=STOP_SECONDS)
                raise

    return AttemptsRunner(settings.attempts, run_all)


def default_driver(drive: Drive) -> Callable[[str, str], dict[str, Any]]:
    """Drives a session by id with the settings' models (a worker, a recovered attempt)."""

    def by_id(session_id: str, sessions_dir: str) -> dict[str, Any]:
        settings = load_settings()
        session = Session(session_id, Path(sessions_dir) / session_id)
        resume = session.status != "prepared"
        return as_result(drive(session, settings, LineNotices(None), resume=resume))

    return by_id
