"""Targets: every go-back as the planner takes it — where to go and what the verb adds.

A ``Target`` names a checkpoint's code, conversation and harness state (or a commit when
there is no checkpoint), the scope, and the verb's adjustments: a restart stashes and sets
a task pending, a reset deletes derived files and is not undoable, an undo restores from
its archive, resume's preparation unwinds the FAILED placeholder, a fork names the new
session. ``rewind.planner.plan`` turns one into the ``RewindPlan`` the executor runs:
the code, the history and the verb's extras are each a small value of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tilth.errors import UsageError
from tilth.timeline.record.checkpoints import Checkpoint
from tilth.timeline.record.dir_state import is_manifest_head
from tilth.timeline.rewind.code_restore import Overlay
from tilth.timeline.rewind.plan import SCOPES


@dataclass(frozen=True)
class CodeGoal:
    """The code a go-back returns to."""

    head: str
    """The commit (or ``manifest:`` snapshot) the code goes back to."""
    overlay: Overlay = field(default_factory=dict)
    """The uncommitted files of the checkpoint, written over ``head``."""
    force: bool = False
    """Overwrite the user's edits too (``tilth rewind --force``)."""
    stash_message: str | None = None
    """Stash uncommitted changes instead of keeping the user's edits (restart)."""


@dataclass(frozen=True)
class HistoryGoal:
    """The conversation, harness state, log and timeline a go-back returns to (None: left
    as they are)."""

    state: dict[str, Any] | None = None
    """Harness state to restore."""
    threads: dict[str, str | None] | None = None
    event_offset: int | None = None
    event_seq: int = 0
    keep_through_seq: int | None = None
    """Delete the (non-``before-``) checkpoints after this one."""


@dataclass(frozen=True)
class Extras:
    """What a verb adds to going back."""

    delete_paths: tuple[str, ...] = ()
    note: bool = False
    """Add the "files were restored" note to the thread the worker reads next."""
    undoable: bool = True
    """Record a ``before-<op>`` checkpoint first (all but reset to the seed and a fork)."""
    archive: str | None = None
    """Undo: the before-checkpoint's archive (threads, ledgers, log tail, checkpoints)."""
    unwind: str | None = None
    """Resume: ``git reset --soft`` to this commit."""
    fork: dict[str, Any] | None = None
    """Fork: the new session to make at the checkpoint (``steps.MakeChild``); this one is
    only read."""


@dataclass(frozen=True)
class Target:
    """Where one go-back goes and what the verb adds; ``plan`` turns it into a plan."""

    op: str
    """``rewind``, ``restart``, ``reset_to_seed``, ``undo``, ``resume`` or ``fork``."""
    ref: str
    """The checkpoint id (or ``seed`` / a short commit when there is no checkpoint)."""
    label: str
    scope: str
    headline: str
    code: CodeGoal | None = None
    """None leaves the code alone."""
    history: HistoryGoal = field(default_factory=HistoryGoal)
    extras: Extras = field(default_factory=Extras)
    checkpoint: Checkpoint | None = None
    details: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    event: dict[str, Any] | None = None


def checkpoint_target(
    checkpoint: Checkpoint, scope: str, *, op: str = "rewind", force: bool = False
) -> Target:
    """Go back to ``checkpoint`` in ``scope`` (what ``tilth rewind`` asks for)."""
    if scope not in SCOPES:
        raise UsageError(f"--scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    code = scope in ("both", "code")
    history = scope in ("both", "conversation")
    return Target(
        op=op,
        ref=checkpoint.id,
        label=checkpoint.label,
        scope=scope,
        headline=f"{op} session {{session}} to {checkpoint.id} ({checkpoint.label}), scope {scope}",
        code=CodeGoal(checkpoint.head, dict(checkpoint.overlay), force=force) if code else None,
        history=HistoryGoal(
            state=dict(checkpoint.state),
            threads=dict(checkpoint.threads),
            event_offset=checkpoint.event_offset,
            event_seq=checkpoint.event_seq,
            # A chat checkpoint is the instant before its turn: going back there undoes the
            # turn, so its checkpoint goes too (the next prompt records a fresh one).
            keep_through_seq=(
                checkpoint.seq - 1 if is_manifest_head(checkpoint.head) else checkpoint.seq
            ),
        )
        if history
        else HistoryGoal(event_seq=checkpoint.event_seq),
        extras=Extras(note=scope == "code"),
        checkpoint=checkpoint,
        warnings=tuple(f"{checkpoint.id}: {gap}" for gap in checkpoint.gaps) if code else (),
        event={"type": op, "payload": {"to": checkpoint.id, "scope": scope}},
    )


def fork_target(
    checkpoint: Checkpoint, headline: str, details: tuple[str, ...], fork: dict[str, Any]
) -> Target:
    """Fork at ``checkpoint`` into the new session ``fork`` describes (``steps.MakeChild``):
    this session is only read, so nothing of it changes and no undo point is recorded."""
    return Target(
        op="fork",
        ref=checkpoint.id,
        label=checkpoint.label,
        scope="both",
        headline=headline,
        extras=Extras(undoable=False, fork=fork),
        checkpoint=checkpoint,
        details=details,
    )
