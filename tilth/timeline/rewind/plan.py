"""The plan of one go-back operation: a small header and the steps it is made of.

``RewindPlan`` names the operation (verb, session, target) and holds a tuple of frozen
steps (``rewind.steps``: record the undo point, stash, restore the code, unwind, restore
the state, cut the threads and the log, drop checkpoints, make a fork, graft...). Each
step carries both what the executor writes (absolute values, so it can be repeated after
a crash) and what a user reads (files restored or deleted, commits, events and messages
dropped, task status changes, conflicts). ``render()`` — at once the ``--dry-run``
output and the confirmation text — ``to_dict()`` and ``summary()`` derive from the steps.
The journal keeps the plan as one flat record (``to_dict``), the shape older Tilths wrote,
so an operation a crash interrupted is finished whichever version wrote its journal.
"""

from __future__ import annotations

import copy
import secrets
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from tilth.errors import TilthError
from tilth.session.migrations import upgrade
from tilth.session.schemas import SCHEMAS
from tilth.timeline.rewind.plan_record import blank_record, steps_of
from tilth.timeline.rewind.steps import (
    STEP_ORDER,
    AddNote,
    CutEvents,
    CutThreads,
    DeletePaths,
    DropCheckpoints,
    Graft,
    LogEvent,
    MakeChild,
    RecordUndo,
    RestoreCode,
    RestoreState,
    Stash,
    Step,
    Unwind,
)

SCOPES = ("both", "code", "conversation")
NEW_ID = "<new id>"
"""What a preview shows where a fork's new session id will go (``RewindPlan.preview``)."""
PLAN_SCHEMA = SCHEMAS["plan"]
"""2: ``before``/archive fields for undo, ``unwind`` for resume, ``fork`` for forks."""


class RewindError(TilthError):
    """A rewind cannot be planned or carried out as asked."""


def new_op_id() -> str:
    """A unique, time-sortable id for one operation."""
    return f"op-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


S = TypeVar("S", bound=Step)


@dataclass
class RewindPlan:
    """One go-back operation: what it is (the header) and the steps it is made of."""

    op: str
    """``rewind``, ``restart``, ``reset_to_seed``, ``undo``, ``resume``, ``fork``, ``graft``."""
    op_id: str
    session_id: str
    target: str
    """Checkpoint id (or ``seed`` for a reset without a seed checkpoint)."""
    target_label: str
    scope: str
    worktree: str
    headline: str = ""
    steps: tuple[Step, ...] = ()
    """What the executor carries out, in ``rewind.steps.STEP_TYPES`` order (it runs them in
    ``STEP_ORDER`` of their journal names)."""
    details: list[str] = field(default_factory=list)
    """Operation-specific lines (stages that will re-run, files deleted...)."""
    warnings: list[str] = field(default_factory=list)

    # ---- the steps -----------------------------------------------------------------------------
    def find(self, kind: type[S]) -> S | None:
        """This plan's step of ``kind``, if it has one."""
        return next((s for s in self.steps if isinstance(s, kind)), None)

    def step_named(self, name: str) -> Step:
        """The step that carries out the journal step ``name``."""
        for step in self.steps:
            if name in step.NAMES:
                return step
        raise RewindError(f"the plan of {self.op_id} has no step {name!r}")

    def journal_steps(self) -> list[str]:
        """The journal's step names for this plan, in execution order (``finish`` last)."""
        wanted = {name for step in self.steps for name in step.NAMES} | {"finish"}
        return [name for name in STEP_ORDER if name in wanted]

    def adding(self, step: Step) -> RewindPlan:
        """This plan with one more step (``tilth attempts --pick`` adds a graft)."""
        return replace(self, steps=(*self.steps, step))

    # ---- what the steps say, by their old names (front ends and tests read these) ----------
    @property
    def head(self) -> str | None:
        code = self.find(RestoreCode)
        return code.head if code else None

    @property
    def overlay(self) -> dict[str, Any]:
        code = self.find(RestoreCode)
        return dict(code.overlay) if code else {}

    @property
    def keep(self) -> dict[str, Any]:
        code = self.find(RestoreCode)
        return dict(code.keep) if code else {}

    @property
    def force(self) -> bool:
        code = self.find(RestoreCode)
        return code.force if code else False

    @property
    def snapshot_code(self) -> bool:
        code = self.find(RestoreCode)
        return code.snapshot if code else False

    @property
    def files(self) -> list[tuple[str, str]]:
        code = self.find(RestoreCode)
        return list(code.files) if code else []

    @property
    def commits_dropped(self) -> list[tuple[str, str]]:
        code = self.find(RestoreCode)
        return list(code.commits_dropped) if code else []

    @property
    def conflicts(self) -> list[str]:
        code = self.find(RestoreCode)
        return list(code.conflicts) if code else []

    @property
    def commits_restored(self) -> list[tuple[str, str]]:
        code = self.find(RestoreCode)
        return list(code.commits_restored) if code else []

    @property
    def task_changes(self) -> list[tuple[str, str, str]]:
        state = self.find(RestoreState)
        return list(state.task_changes) if state else []

    @property
    def messages_dropped(self) -> dict[str, int]:
        threads = self.find(CutThreads)
        return dict(threads.messages_dropped) if threads else {}

    @property
    def threads_deleted(self) -> list[str]:
        threads = self.find(CutThreads)
        return list(threads.threads_deleted) if threads else []

    @property
    def checkpoints_dropped(self) -> int:
        drops = self.find(DropCheckpoints)
        return drops.count if drops else 0

    @property
    def stash_message(self) -> str | None:
        stash = self.find(Stash)
        return stash.message if stash else None

    @property
    def unwind(self) -> str | None:
        unwind = self.find(Unwind)
        return unwind.commit if unwind else None

    @property
    def state(self) -> dict[str, Any] | None:
        state = self.find(RestoreState)
        return state.state if state else None

    @property
    def threads(self) -> dict[str, str | None] | None:
        threads = self.find(CutThreads)
        return threads.heads if threads else None

    @property
    def note(self) -> dict[str, str] | None:
        note = self.find(AddNote)
        return {"thread": note.thread, "text": note.text} if note else None

    @property
    def delete_paths(self) -> list[str]:
        paths = self.find(DeletePaths)
        return list(paths.paths) if paths else []

    @property
    def event_offset(self) -> int | None:
        events = self.find(CutEvents)
        return events.offset if events else None

    @property
    def events_dropped(self) -> int:
        events = self.find(CutEvents)
        return events.events_dropped if events else 0

    @property
    def event_types(self) -> dict[str, int]:
        events = self.find(CutEvents)
        return dict(events.event_types) if events else {}

    @property
    def keep_through_seq(self) -> int | None:
        drops = self.find(DropCheckpoints)
        return drops.keep_through if drops else None

    @property
    def drop_seqs(self) -> list[int]:
        drops = self.find(DropCheckpoints)
        return list(drops.drop_seqs) if drops else []

    @property
    def archive(self) -> str | None:
        """Undo: the archive the conversation, ledgers, log tail and checkpoints come from."""
        archives = [
            step.archive
            for step in self.steps
            if isinstance(step, DropCheckpoints | CutEvents | CutThreads | RestoreState)
        ]
        return next((a for a in archives if a is not None), None)

    @property
    def fork(self) -> dict[str, Any] | None:
        child = self.find(MakeChild)
        return child.spec if child else None

    @property
    def graft(self) -> dict[str, Any] | None:
        graft = self.find(Graft)
        return graft.spec if graft else None

    @property
    def before(self) -> str | None:
        undo = self.find(RecordUndo)
        return undo.kind if undo else None

    @property
    def before_seq(self) -> int | None:
        undo = self.find(RecordUndo)
        return undo.seq if undo else None

    @property
    def changes_code(self) -> bool:
        return self.find(RestoreCode) is not None

    @property
    def changes_anything(self) -> bool:
        """False for a plan whose execution would only log that it ran."""
        quiet = (RecordUndo, LogEvent, AddNote, Stash)
        return any(not isinstance(step, quiet) for step in self.steps)

    # ---- the report --------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """The counts recorded in the event and the operations log."""
        return {
            "files": len(self.files),
            "commits_dropped": len(self.commits_dropped),
            "events_dropped": self.events_dropped,
            "messages_dropped": sum(self.messages_dropped.values()),
            "threads_deleted": len(self.threads_deleted),
            "checkpoints_dropped": self.checkpoints_dropped,
            "tasks": {tid: new for tid, _, new in self.task_changes},
            "stashed": bool(self.stash_message and self.conflicts),
        }

    def render(self, undo_with: str = "`tilth rewind --undo`") -> str:
        """The plan in words: the ``--dry-run`` output and the confirmation text, each step
        saying its part. ``undo_with`` names how the person reading it undoes the go-back
        (a chat: ``/undo``)."""
        lines = [self.headline or f"{self.op} session {self.session_id} to {self.target}"]
        lines += [f"  {d}" for d in self.details]
        code, unwind = self.find(RestoreCode), self.find(Unwind)
        if code is not None:
            lines += code.describe(self)
        elif unwind is not None:
            lines += unwind.describe(self)
        elif self.find(MakeChild) is None:
            lines.append("code: files are kept as they are")
        for kind in (CutEvents, RestoreState, CutThreads, AddNote, DropCheckpoints, DeletePaths):
            step = self.find(kind)
            lines += step.describe(self) if step is not None else []
        if code is not None:
            lines += code.conflict_lines(stashed=self.find(Stash) is not None)
        lines += [f"warning: {w}" for w in self.warnings]
        undo = self.find(RecordUndo)
        if undo is not None:
            lines.append(undo.undo_line(undo_with))
        return "\n".join(lines)

    def preview(self) -> RewindPlan:
        """This plan as shown by a dry run, which never carries it out.

        A fork's plan reserves the new session's id for the executor; a dry run throws the
        plan away, so a fork made later gets another id. The preview shows ``NEW_ID`` (and
        ``fork.child`` None) instead of an id that will never exist. Other plans are shown as
        they are; a plan shown and then executed (``execute_fork``) keeps its real id.
        """
        made = self.find(MakeChild)
        child = str(made.spec.get("child") or "") if made else ""
        if not child or made is None:
            return self

        def hidden(text: str) -> str:
            return text.replace(child, NEW_ID)

        spec = {k: hidden(v) if isinstance(v, str) else v for k, v in made.spec.items()}
        spec["child"] = None
        steps = tuple(MakeChild(spec) if s is made else s for s in self.steps)
        details = [hidden(line) for line in self.details]
        details.append(f"{NEW_ID}: the new session's id is assigned when the fork is made")
        return replace(self, headline=hidden(self.headline), details=details, steps=steps)

    # ---- the journal's copy ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-able: the journal's copy of the plan, and the web API's dry run — one flat
        record, every key always present (``rewind.plan_record``)."""
        flat = blank_record(self)
        for step in self.steps:
            flat.update(step.flat())
        flat["archive"] = self.archive
        return {"schema": PLAN_SCHEMA, **copy.deepcopy(flat)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RewindPlan:
        """Read a plan back (any schema up to this one: later fields default)."""
        data = upgrade("plan", data, where="the rewind journal's plan")
        return cls(
            op=str(data["op"]),
            op_id=str(data["op_id"]),
            session_id=str(data["session_id"]),
            target=str(data["target"]),
            target_label=str(data.get("target_label") or ""),
            scope=str(data.get("scope") or "both"),
            worktree=str(data.get("worktree") or ""),
            headline=str(data.get("headline") or ""),
            steps=steps_of(data),
            details=[str(d) for d in data.get("details") or []],
            warnings=[str(w) for w in data.get("warnings") or []],
        )
