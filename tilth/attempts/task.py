"""Best of N for one task: N attempts forked from the task's start, the winner chosen by
checks and brought into the parent (SPEC §11).

The parent records the task's start (its checkpoint is every attempt's fork point),
forks N sessions of kind ``attempt`` through the one planner and journal, and puts
each on the durable queue (``tilth.attempts.engine``), K at a time. Each attempt runs
the task's whole pipeline in its own worktree and stops when the task is over. The
figures decide (``figures.choose``), ``attempt_selected`` records them, and the
winner's work is grafted into the parent (``graft``): the run goes on from there.
A parent that stopped half-way through its attempts finds them again on resume.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tilth import git
from tilth.agent.pipeline import TaskOutcome, begin_task, run_task
from tilth.agent.run_context import RunContext
from tilth.agent.stops import FailureReason, StopReason, StopRun
from tilth.agent.task_state import TaskState
from tilth.attempts.figures import AttemptFigures, choose, measure
from tilth.attempts.spend import attempt_sessions, undecided
from tilth.errors import TilthError
from tilth.session.events import payloads_of
from tilth.session.store import Session
from tilth.session.task import Task
from tilth.timeline.controller import TimelineController
from tilth.timeline.record.checkpoints import Checkpoint, list_checkpoints
from tilth.timeline.rewind.graft import graft_spec
from tilth.timeline.rewind.planner import plan_graft

KIND = "attempt"

LocalDriver = Callable[[Session, int], Callable[[], dict[str, Any]] | None]
"""Makes the in-process driver of attempt ``n`` (injected models), or None."""


class AttemptsFailed(TilthError):
    """No attempt could be made or run."""


@dataclass
class AttemptsRunner:
    """``RunContext.task_runner`` for a best-of-N run."""

    count: int
    run_all: Callable[[Iterator[Session]], list[Any]]
    """Runs the attempt sessions to their stops (on the queue), each from when it is
    made (the next is forked while it runs); a result per session."""
    on_line: Callable[[str], Any] | None = None

    def __call__(self, ctx: RunContext, task: Task) -> TaskOutcome:
        task_id = task.id
        state = TaskState.load(ctx.session, task_id)
        if state.stages_done or (state.base_commit is not None and git.is_dirty(ctx.worktree)):
            # Under way in place already (a run from before, a retry holding a failed
            # attempt's work): it goes on where it stands.
            return run_task(ctx, task)
        start = _task_start(ctx, task, state)
        tokens_at_start = _tokens_at(start, ctx.session.tokens_used)
        earlier = _earlier(ctx.session, task_id, start)
        count = max(asked(earlier.sessions) or self.count, len(earlier.ids))
        ctx.progress.note(f"  {task_id}: {count} attempts from {start.id}")
        # A resume goes on with the attempts made before; a stop that came while they were
        # being forked left fewer than asked, and the rest are forked now (numbered on).
        children = list(earlier.sessions)
        forks = self._forks(ctx, start, task_id, children, earlier, count)
        try:
            self.run_all(forks)
        finally:
            forks.close()  # a stop mid-forking still records the attempts made
        cut_short = [c for c in children if not task_over(c)]
        if any(c.last_stop() == "token_cap" for c in cut_short):
            # They shared the session's token cap (``spend``): the run stops as on its own.
            raise StopRun(
                "token_cap",
                f"token cap reached by {task_id}'s attempts "
                f"[TILTH_MAX_TOKENS={ctx.settings.max_tokens}]",
            )
        if cut_short:
            # Not decided on half a race: resume runs them on from where they stopped. A cap
            # or a Ctrl-C that stopped them stops the run as it would have stopped it alone
            # (its reason, status and exit code); anything else is an error.
            stopped = ", ".join(c.id for c in cut_short)
            reasons = {c.last_stop() for c in cut_short}
            passed_on: tuple[StopReason, ...] = ("wall_clock", "interrupted")
            reason: StopReason = next((r for r in passed_on if r in reasons), "error")
            minutes = f"{ctx.settings.max_wall_clock_minutes:g}"
            why = {
                "wall_clock": f"wall clock cap reached [TILTH_MAX_WALL_CLOCK_MINUTES={minutes}]: ",
                "interrupted": "interrupted: ",
            }.get(reason, "")
            raise StopRun(
                reason,
                f"{why}attempt(s) {stopped} stopped before {task_id} was over; "
                f"`tilth resume {ctx.session.id}` continues them",
            )
        base = state.base_commit or start.head
        figures = [measure(c, task_id, base, tokens_at_start) for c in children]
        return _select(ctx, task_id, start, children, figures)

    def _forks(
        self,
        ctx: RunContext,
        start: Checkpoint,
        task_id: str,
        made: list[Session],
        earlier: Earlier,
        count: int,
    ) -> Generator[Session, None, None]:
        """The task's ``count`` attempts: those in ``made`` already (made by an earlier run),
        then the rest, forked one by one (each added to ``made``). Once all exist,
        ``attempts_started`` records them (a resumed parent finds them by its latest one). A
        stop before then (Ctrl-C, SIGTERM while the next is forked) records those made so
        far: they run and spend already, so a resume goes on with them, their tokens
        counted, and forks the ones still missing."""
        new: list[str] = []
        try:
            yield from list(made)
            for number in range(len(earlier.ids) + 1, count + 1):
                child = self._fork(ctx, start, task_id, number, count)
                made.append(child)
                new.append(child.id)
                yield child
        finally:
            attempts = [*earlier.ids, *new]
            if attempts != earlier.listed:
                ctx.session.log(
                    "attempts_started", task_id=task_id, checkpoint=start.id, attempts=attempts
                )

    def _fork(
        self, ctx: RunContext, start: Checkpoint, task_id: str, number: int, count: int
    ) -> Session:
        controller = TimelineController(ctx.session, ctx.settings)
        child = controller.fork(start).session
        child.update_checkpoint(
            kind=KIND,
            attempt={
                "parent": ctx.session.id,
                "task_id": task_id,
                "checkpoint": start.id,
                "number": number,
                "of": count,
            },
        )
        return child


def _task_start(ctx: RunContext, task: Task, state: TaskState) -> Checkpoint:
    """The task's start on the parent's timeline (recorded now when it has none)."""
    task_id = task.id
    recorded = begin_task(ctx, task, state)
    if isinstance(recorded, Checkpoint):
        return recorded
    starts = [
        c
        for c in list_checkpoints(ctx.session)
        if c.kind == "task_start" and c.task_id == task_id and c.head == state.base_commit
    ]
    if not starts:
        raise AttemptsFailed(
            f"task {task_id} has no start checkpoint to fork its attempts from",
            hint=f"`tilth restart {ctx.session.id} {task_id}` starts it afresh",
        )
    return starts[-1]


def task_over(child: Session) -> bool:
    """True when the attempt ``child``'s task ended (done or failed), not cut short."""
    task_id = attempt_record(child).get("task_id")
    status = next((t.status for t in child.tasks() if t.id == task_id), None)
    return status in ("done", "failed")


def attempt_record(session: Session) -> dict[str, Any]:
    """The ``attempt`` entry of an attempt session's checkpoint.json ({} otherwise)."""
    record = session.record().extra.get("attempt")
    return record if isinstance(record, dict) else {}


@dataclass(frozen=True)
class Earlier:
    """The attempts an earlier run made from a task's start, not decided yet."""

    ids: list[str]
    """Their ids, in attempt order (deleted ones too: their numbers stay taken)."""
    listed: list[str]
    """As the parent's latest ``attempts_started`` lists them."""
    sessions: list[Session]
    """Those not deleted since."""


def _earlier(parent: Session, task_id: str, start: Checkpoint) -> Earlier:
    """The attempts made earlier from ``start`` and not decided yet (a resumed parent): those
    its latest ``attempts_started`` lists (a top-up after a stop mid-forking lists them all
    again), then any made but never listed (the run was killed while they were forked, its
    record never written)."""
    none = Earlier([], [], [])
    decided = {
        str(p.get("checkpoint"))
        for p in payloads_of(parent.events.path, "attempt_selected")
        if p.get("task_id") == task_id
    }
    if start.id in decided:
        return none
    listed: list[str] = []
    for payload in payloads_of(parent.events.path, "attempts_started"):
        if payload.get("task_id") == task_id and payload.get("checkpoint") == start.id:
            listed = [str(i) for i in payload.get("attempts") or []]
    unlisted = [
        s
        for s in attempt_sessions(parent)
        if s.id not in listed
        and attempt_record(s).get("task_id") == task_id
        and attempt_record(s).get("checkpoint") == start.id
    ]
    unlisted.sort(key=lambda s: (_number(s), s.id))
    ids = [*listed, *(s.id for s in unlisted)]
    found = [Session(i, parent.dir.parent / i) for i in ids]
    sessions = [s for s in found if s.dir.is_dir()]
    if not sessions:
        return none  # none left (deleted): the task's attempts start afresh
    return Earlier(ids, listed, sessions)


def _number(attempt: Session) -> int:
    number = attempt_record(attempt).get("number")
    return number if isinstance(number, int) else 0


def asked(attempts: Sequence[Session]) -> int:
    """How many attempts their run asked for (their records' ``of``; 0: unknown)."""
    counts = [attempt_record(a).get("of") for a in attempts]
    return max((c for c in counts if isinstance(c, int)), default=0)


def attempts_in_flight(parent: Session) -> tuple[str, int] | None:
    """The task of ``parent``'s last best-of-N and how many of its attempts are still
    undecided (None: none are).

    A run stopped half-way through its attempts (a cap, Ctrl-C) is resumed as one: a plain
    ``tilth resume`` finds them and runs them on, as its advice says, instead of starting
    the task over in place beside them.
    """
    found = undecided(parent)
    if found is None:
        return None
    return found.task_id, max(len(found.attempts), asked(found.attempts))


def _tokens_at(start: Checkpoint, fallback: int) -> int:
    """The session's token count at ``start`` (where every attempt's count begins)."""
    value = start.state.get("tokens_used")
    return value if isinstance(value, int) else fallback


def _select(
    ctx: RunContext,
    task_id: str,
    start: Checkpoint,
    children: list[Session],
    figures: list[AttemptFigures],
) -> TaskOutcome:
    winner_index = choose(figures)
    winner, best = children[winner_index], figures[winner_index]
    selected = {
        "task_id": task_id,
        "winner": winner.id,
        "checkpoint": start.id,
        "attempts": [f.to_dict() for f in figures],
    }
    for number, item in enumerate(figures, 1):
        mark = "★" if item is best else " "
        ctx.progress.note(
            f"  {mark} attempt {number} {item.session}: "
            f"{'passed' if item.passed else 'failed'}, {item.failed_gates} failed gate(s), "
            f"{item.diff_lines} diff line(s), {item.tokens:,} token(s) — {item.reason}"
        )
    head = git.head(winner.workspace_dir)
    placeholder = placeholder_of(winner, task_id)
    if placeholder is not None:
        head = git.rev_parse(f"{placeholder}^", winner.workspace_dir) or start.head
    # Journaled: a crash half-way is finished by the next resume (or any go-back).
    spec = graft_spec(
        winner,
        task_id,
        start.seq,
        head,
        placeholder=None if best.passed else placeholder,
        tokens=sum(f.tokens for f in figures),
        before=[{"type": "attempt_selected", "payload": selected}],
    )
    plan = plan_graft(ctx.session, spec, f"{task_id} won by attempt {winner.id}")
    TimelineController(ctx.session, ctx.settings).execute(plan)
    if best.passed:
        return TaskOutcome("done", summary=f"won by attempt {winner.id}: {best.reason}")
    reason: FailureReason = _failure(best.failure)
    return TaskOutcome(
        "failed",
        reason,
        f"no attempt passed; the best ({winner.id}) is kept: {best.failure}",
        {"attempts": len(figures)},
    )


def placeholder_of(child: Session, task_id: str) -> str | None:
    """The FAILED placeholder commit an attempt made for ``task_id`` (None: it passed)."""
    found = None
    for payload in payloads_of(child.events.path, "task_failed"):
        if payload.get("task_id") == task_id and isinstance(payload.get("placeholder_sha"), str):
            found = str(payload["placeholder_sha"])
    return found


def _failure(text: str | None) -> FailureReason:
    known = (
        "iter_cap",
        "evaluator_cap",
        "verify_cap",
        "empty_responses",
        "no_case",
        "repeated_calls",
    )
    return text if text in known else "no_case"  # type: ignore[return-value]
