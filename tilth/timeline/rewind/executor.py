"""The executing half of going back: journaled, idempotent steps, and recovery.

``execute_rewind`` writes the intent journal, then runs the plan's steps in a
fixed order, noting when the first one starts and as each one finishes. Every
step writes absolute values (reset to a sha, cut to an offset, truncate to a
message id), so repeating a step that was interrupted half-way is harmless.
``recover`` finishes an operation that had started mutating, or drops one that
had not.

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
from pathlib import Path
from typing import Any

from tilth import git
from tilth.errors import SessionCorrupt
from tilth.session.store import Session
from tilth.session.threads import Thread
from tilth.timeline.faults import fault_point
from tilth.timeline.record.blob_store import session_store
from tilth.timeline.record.checkpoints import (
    checkpoint_path,
    delete_after,
    forget_highest,
    highest_seq,
    remember_highest,
)
from tilth.timeline.record.dir_state import is_manifest_head
from tilth.timeline.record.state_capture import last_event
from tilth.timeline.rewind import fork as forking
from tilth.timeline.rewind import graft as grafting
from tilth.timeline.rewind import undo
from tilth.timeline.rewind.code_restore import apply_files
from tilth.timeline.rewind.code_state import note_code_state, note_restored, restore_overlay
from tilth.timeline.rewind.journal import (
    Journal,
    clear_journal,
    keep_operations,
    log_operation,
    read_journal,
    write_journal,
)
from tilth.timeline.rewind.plan import RewindError, RewindPlan
from tilth.timeline.rewind.snapshot_restore import apply_snapshot_files
from tilth.timeline.rewind.state_restore import (
    cut_events,
    cut_lines,
    remove_path,
    restore_counts,
    restore_files,
    restore_threads,
)

FORK_STEPS = ("fork-created", "fork-files", "fork-worktree", "fork-record")
STEP_ORDER = (
    "before",
    "stash",
    "code",
    "unwind",
    "state",
    "ledger",
    "threads",
    "note",  # after the threads: a code rewind that drops threads keeps its note
    "paths",
    "events",
    "checkpoints",
    *FORK_STEPS,
    "log",
    *grafting.GRAFT_STEPS,
    "finish",
)


def steps_for(plan: RewindPlan) -> list[str]:
    """The steps ``plan`` needs, in execution order."""
    wanted = {
        "before": plan.before is not None and plan.before_seq is not None,
        "stash": plan.stash_message is not None and plan.head is not None,
        "code": plan.changes_code,
        "unwind": plan.unwind is not None,
        "note": plan.note is not None,
        "state": plan.state is not None,
        "ledger": plan.state is not None,
        "threads": plan.threads is not None,
        "paths": bool(plan.delete_paths),
        "events": plan.event_offset is not None,
        "checkpoints": plan.keep_through_seq is not None or plan.keep_seqs is not None,
        **{step: plan.fork is not None for step in FORK_STEPS},
        **{step: plan.graft is not None for step in grafting.GRAFT_STEPS},
        "log": plan.event is not None,
        "finish": True,
    }
    return [step for step in STEP_ORDER if wanted[step]]


# ---- the steps -------------------------------------------------------------------------------
def _stash(session: Session, plan: RewindPlan) -> None:
    assert plan.stash_message is not None
    # Idempotent: once stashed, the worktree is clean and there is nothing left to stash.
    git.stash(Path(plan.worktree), plan.stash_message, ref=git.stash_ref(session.id))


def _before(session: Session, plan: RewindPlan) -> None:
    undo.record_before(session, plan)


def _code(session: Session, plan: RewindPlan) -> None:
    worktree = Path(plan.worktree)
    if plan.snapshot_code or is_manifest_head(plan.head):
        # No git (a chat): write exactly the planned files (plan.overlay holds the writes).
        apply_snapshot_files(session, worktree, plan.overlay)
        return
    assert plan.head is not None
    if plan.op == "reset_to_seed":
        # SPEC §7: the first seed's reset, exactly: `git reset --hard` + `git clean -fd`.
        git.reset_hard(worktree, plan.head)
        git.clean_fd(worktree)
        # What restarts stashed goes too: no tip of the erased run is kept (the first seed).
        git.delete_ref(worktree, git.stash_ref(session.id))
        restore_overlay(session, worktree, plan.overlay, keep=plan.keep)
        return
    # Only the files the plan lists (and those moving HEAD changes) are written; the
    # user's kept edits are never touched. The restored state is noted either way.
    store = session_store(session)
    apply_files(worktree, plan.head, plan.files, plan.overlay, plan.keep, store)
    # An undo also notes the agent's state behind the tree it wrote (the user's files in
    # that tree stay the user's for the go-backs that follow).
    note_restored(session, worktree, plan.overlay, agent=plan.recorded)


def _unwind(session: Session, plan: RewindPlan) -> None:
    assert plan.unwind is not None
    git.reset_soft(Path(plan.worktree), plan.unwind)


def _note(session: Session, plan: RewindPlan) -> None:
    assert plan.note is not None
    thread = Thread(session.threads.directory, plan.note["thread"])
    stored = thread.read()
    if stored and stored[-1].meta.get("op") == plan.op_id:
        return
    thread.append({"role": "user", "content": plan.note["text"]}, kind="rewind_note", op=plan.op_id)


def _state(session: Session, plan: RewindPlan) -> None:
    assert plan.state is not None
    restore_files(session, plan.state)


def _ledger(session: Session, plan: RewindPlan) -> None:
    assert plan.state is not None
    if plan.archive is not None:
        undo.restore_archived_ledger(session, plan.archive)
        return
    restore_counts(session.ledger.directory, dict(plan.state.get("ledger") or {}))
    lines = plan.state.get("progress_lines")
    if isinstance(lines, int):
        cut_lines(session.progress_path, lines)


def _threads(session: Session, plan: RewindPlan) -> None:
    assert plan.threads is not None
    if plan.archive is not None:
        undo.restore_archived_threads(session, plan.archive)
    restore_threads(session.threads.directory, plan.threads)


def _paths(session: Session, plan: RewindPlan) -> None:
    for rel in plan.delete_paths:
        remove_path(session.dir / rel)
    if plan.op == "reset_to_seed":
        # The run's go-backs are erased with it; the record of resets stays.
        keep_operations(session, "reset_to_seed")


def _events(session: Session, plan: RewindPlan) -> None:
    assert plan.event_offset is not None
    if plan.archive is not None:
        undo.splice_events(session, plan.archive, plan.event_cut or plan.event_offset, plan.op_id)
        return
    cut_events(session, plan.event_offset, plan.op_id)


def _checkpoints(session: Session, plan: RewindPlan) -> None:
    if not plan.changes_code:
        # Turn snapshots: the files stay as the newest checkpoint left them; note that state
        # before its checkpoint goes, or later rewinds would take them for the user's edits.
        note_code_state(session)
    if plan.keep_seqs is not None and plan.archive is not None:
        remember_highest(session)
        undo.restore_archived_checkpoints(session, plan.archive, plan.keep_seqs)
    elif plan.before is None:
        # Reset to the seed (and journals written before undo existed): everything after.
        assert plan.keep_through_seq is not None
        delete_after(session, plan.keep_through_seq)
        if plan.op == "reset_to_seed":
            forget_highest(session)
    else:
        # Exactly the checkpoints the plan named; undo points (``before-``) stay.
        remember_highest(session)
        for seq in plan.drop_seqs:
            checkpoint_path(session, seq).unlink(missing_ok=True)
    undo.prune_archives(session)


def _log(session: Session, plan: RewindPlan) -> None:
    assert plan.event is not None
    last = last_event(session.events.path)
    if last and last.get("type") == plan.event["type"]:
        payload = last.get("payload")
        if isinstance(payload, dict) and payload.get("op") == plan.op_id:
            return
    payload = {**plan.event.get("payload", {}), "op": plan.op_id, "dropped": plan.summary()}
    session.events.append(str(plan.event["type"]), payload)


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


_STEPS: dict[str, Callable[[Session, RewindPlan], None]] = {
    "before": _before,
    "stash": _stash,
    "code": _code,
    "unwind": _unwind,
    "note": _note,
    "state": _state,
    "ledger": _ledger,
    "threads": _threads,
    "paths": _paths,
    "events": _events,
    "checkpoints": _checkpoints,
    "fork-created": forking.create_child,
    "fork-files": forking.copy_files,
    "fork-worktree": forking.make_worktree,
    "fork-record": forking.finish_child,
    "log": _log,
    "graft-base": grafting.note_base,
    "graft-branch": grafting.branch_step,
    "graft-files": grafting.files_step,
    "graft-log": grafting.log_step,
}
PLAN_NOTING_STEPS = frozenset({"graft-base"})
"""Steps that note a value in the plan, which the journal keeps with their being done."""


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
        _STEPS[step](session, plan)
        fault_point(f"{step}+")
        if step in PLAN_NOTING_STEPS:
            journal.plan = plan.to_dict()
        journal.done.append(step)
        write_journal(session, journal)


def execute_rewind(session: Session, plan: RewindPlan) -> None:
    """Carry out ``plan`` crash-safely. The caller holds the session lock."""
    if plan.before_seq is not None and highest_seq(session) >= plan.before_seq:
        raise RewindError(
            f"session {session.id} changed since this plan was made (a checkpoint was recorded)",
            hint="plan it again; nothing was changed",
        )
    journal = Journal(plan.op_id, plan.to_dict(), steps_for(plan))
    write_journal(session, journal)
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
