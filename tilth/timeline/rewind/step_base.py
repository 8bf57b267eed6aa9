"""What every step of a go-back plan can do, and the order the journal runs them in.

A step (``rewind.steps``, ``rewind.history_steps``) is a small frozen value holding what
it writes (absolute values: a sha, an offset, thread heads), so the executor can repeat an
interrupted one. ``apply`` carries it out for one of its journal names (most steps have
one; restoring the state also restores the ledger, a fork and a graft have four each);
``record_undo`` copies into the undo archive what it is about to destroy; ``describe`` is
its part of the plan a person reads; ``flat`` its keys in the journal's copy of the plan
(the one flat record older Tilths wrote, read back by ``rewind.plan_record``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Protocol

from tilth.session.store import Session
from tilth.timeline.rewind.fork_steps import FORK_STEPS
from tilth.timeline.rewind.graft import GRAFT_STEPS

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
    *GRAFT_STEPS,
    "finish",
)
"""Every journal step name, in execution order (``finish`` is the executor's own)."""


class PlanView(Protocol):
    """The plan as its steps see it (``rewind.plan.RewindPlan`` is the one), so the steps
    stand below the plan that is made of them."""

    @property
    def op(self) -> str: ...
    @property
    def op_id(self) -> str: ...
    @property
    def session_id(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def target_label(self) -> str: ...
    @property
    def scope(self) -> str: ...
    @property
    def worktree(self) -> str: ...
    @property
    def headline(self) -> str: ...
    @property
    def steps(self) -> tuple[Step, ...]: ...
    @property
    def details(self) -> list[str]: ...
    @property
    def warnings(self) -> list[str]: ...
    @property
    def before(self) -> str | None: ...
    @property
    def before_seq(self) -> int | None: ...
    @property
    def files(self) -> list[tuple[str, str]]: ...
    @property
    def keep(self) -> dict[str, Any]: ...
    @property
    def force(self) -> bool: ...
    @property
    def snapshot_code(self) -> bool: ...
    @property
    def changes_code(self) -> bool: ...
    @property
    def conflicts(self) -> list[str]: ...
    def summary(self) -> dict[str, Any]: ...


class Step:
    """What every step can do; the frozen dataclasses below hold what it writes."""

    NAMES: ClassVar[tuple[str, ...]] = ()
    """The journal's names for this step (also the ``TILTH_FAULT_AT`` values)."""

    def apply(self, session: Session, plan: PlanView, name: str) -> None:
        """Carry out the part ``name`` of this step (idempotent: absolute values only)."""
        raise NotImplementedError

    def record_undo(self, session: Session, archive: Path, meta: dict[str, Any]) -> None:
        """Copy into the undo ``archive`` what this step destroys (most destroy nothing
        an undo needs back beyond the undo point itself)."""

    def describe(self, plan: PlanView) -> list[str]:
        """This step's lines of the dry run and the confirmation."""
        return []

    def flat(self) -> dict[str, Any]:
        """This step's keys in the journal's flat copy of the plan."""
        raise NotImplementedError


def listing(title: str, items: list[str], empty: str, limit: int = 20) -> list[str]:
    """A titled list of at most ``limit`` items (``empty`` when there are none)."""
    if not items:
        return [f"{title}: {empty}"] if empty else []
    out = [f"{title} ({len(items)}):"]
    out += [f"    {item}" for item in items[:limit]]
    if len(items) > limit:
        out.append(f"    ... and {len(items) - limit} more")
    return out
