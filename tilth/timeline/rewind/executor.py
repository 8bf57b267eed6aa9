"""The executing half of going back: the journal run over a plan's steps, and recovery.

``execute_rewind`` writes the intent journal, then runs the plan's steps
(``rewind.steps``: each applies itself) in a fixed order, noting when the first one
starts and as each one finishes. Every step writes absolute values (reset to a sha,
cut to an offset, truncate to a message id), so repeating a step that was interrupted
half-way is harmless. ``recover`` finishes an operation that had started mutating, or
drops one that had not. The executor knows no verb: it runs whatever steps a plan holds.

Step names (also the ``TILTH_FAULT_AT`` values; ``<step>+`` = just after it):
``journal`` (written, nothing changed yet), ``before`` (the undo point), ``stash``,
``code``, ``unwind``, ``note``, ``state``, ``ledger``, ``threads``, ``paths``,
``events``, ``checkpoints``, ``fork-created``, ``fork-files``, ``fork-worktree``,
``fork-record``, ``log``, ``graft-base``, ``graft-branch``, ``graft-files``, ``graft-log``,
``finish``. A plan runs only the steps it needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tilth.errors import SessionCorrupt
from tilth.session.store import Session
from tilth.timeline.faults import fault_point
from tilth.timeline.record.checkpoints import highest_seq
from tilth.timeline.rewind.journal import (
    Journal,
    clear_journal,
    log_operation,
    read_journal,
    write_journal,
)
from tilth.timeline.rewind.plan import RewindError, RewindPlan

PLAN_NOTING_STEPS = frozenset({"graft-base"})
"""Steps that note a value in the plan, which the journal keeps with their being done."""


def steps_for(plan: RewindPlan) -> list[str]:
    """The journal steps ``plan`` needs, in execution order (``finish`` last)."""
    return plan.journal_steps()


def _finish(session: Session, plan: RewindPlan, *, recovered: bool) -> None:
    log_operation(
        session,
        plan.op_id,
        plan.op,
        target=plan.target,
        label=plan.target_label,
        scope=plan.scope,
        head=plan.head,
        stash=plan.stash_message if plan.summary()["stashed"] else None,
        summary=plan.summary(),
        recovered=recovered,
        **({"child_session": plan.fork["child"]} if plan.fork else {}),
        **({"graft_from": plan.graft["child"]} if plan.graft else {}),
    )
    clear_journal(session)


# ---- running and recovering --------------------------------------------------------------------
def _run(session: Session, journal: Journal, plan: RewindPlan, *, recovered: bool) -> None:
    for step in journal.steps:
        if step in journal.done:
            continue
        if not journal.started:
            # The commit point: from here on, recovery finishes the operation.
            journal.started.append(step)
            write_journal(session, journal)
        fault_point(step)
        if step == "finish":
            _finish(session, plan, recovered=recovered)
            fault_point("finish+")
            return
        plan.step_named(step).apply(session, plan, step)
        fault_point(f"{step}+")
        if step in PLAN_NOTING_STEPS:
            journal.plan = plan.to_dict()
        elif _last_before_finish(journal, step):
            # Not marked done: a crash before ``finish`` repeats it, as a crash just after
            # it (``<step>+``) already does, and the operation's last moments (a fork's,
            # after its checkout) are spared a journal write and its two fsyncs.
            continue
        journal.done.append(step)
        write_journal(session, journal)


def _last_before_finish(journal: Journal, step: str) -> bool:
    at = journal.steps.index(step)
    return at + 1 < len(journal.steps) and journal.steps[at + 1] == "finish"


def execute_rewind(session: Session, plan: RewindPlan) -> None:
    """Carry out ``plan`` crash-safely. The caller holds the session lock."""
    if plan.before_seq is not None and highest_seq(session) >= plan.before_seq:
        raise RewindError(
            f"session {session.id} changed since this plan was made (a checkpoint was recorded)",
            hint="plan it again; nothing was changed",
        )
    journal = Journal(plan.op_id, plan.to_dict(), steps_for(plan))
    # Nothing has changed yet, so this write's directory entry need not be flushed: lost
    # to a power cut, the operation simply never began. The write that marks its start
    # (``_run``, in the same directory) flushes it before the first change.
    write_journal(session, journal, flush_dir=False)
    fault_point("journal")
    _run(session, journal, plan, recovered=False)


def recover(session: Session) -> str | None:
    """Finish (or drop, if it changed nothing yet) an interrupted operation.

    Returns a sentence for the user, or None when nothing was in flight. The
    caller holds the session lock.
    """
    journal = read_journal(session)
    if journal is None:
        return None
    plan = RewindPlan.from_dict(journal.plan)
    if not journal.started:
        log_operation(
            session,
            plan.op_id,
            plan.op,
            target=plan.target,
            scope=plan.scope,
            outcome="abandoned",
        )
        clear_journal(session)
        return (
            f"an interrupted {_name(plan)} to {plan.target} had not changed anything; "
            "it was cancelled"
        )
    _run(session, journal, plan, recovered=True)
    return f"finished an interrupted {_name(plan)} to {plan.target} ({plan.target_label})"


def _name(plan: RewindPlan) -> str:
    return plan.op.replace("_", " ")


@contextmanager
def open_for_writing(
    session: Session, notify: Callable[[str], Any] | None = None
) -> Iterator[None]:
    """Hold the session lock and recover any interrupted operation first (for a fork that
    was interrupted half-way, its parent's: the parent's journal completes it)."""
    complete_own_fork(session, notify)
    with session.lock():
        message = recover(session)
        if message and notify is not None:
            notify(message)
        yield


def complete_own_fork(session: Session, notify: Callable[[str], Any] | None = None) -> None:
    """When ``session`` is a fork interrupted half-way, complete it through its parent's
    journal (the parent's lock is taken for that); otherwise do nothing."""
    try:
        record = session.record().extra
    except SessionCorrupt:
        return
    parent_id = record.get("parent_session")
    if not record.get("fork_incomplete") or not isinstance(parent_id, str):
        return
    parent = Session(parent_id, session.dir.parent / parent_id)
    if not parent.dir.is_dir():
        return
    with parent.lock():
        message = recover(parent)
    if message and notify is not None:
        notify(f"session {parent.id}: {message}")
