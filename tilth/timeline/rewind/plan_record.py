"""A go-back plan as one flat record: the journal's copy, the web API's and ``--json``'s.

Older Tilths kept the plan as one flat record of 42 keys and wrote it so into the intent
journal (``timeline/journal.json``). A plan made of steps is written in that same shape,
every key always present (a step absent from the plan leaves its keys at their defaults),
and read back into steps from it, so a journal torn mid-rewind by either version is
finished or cancelled by this one, and the JSON front ends show did not change.
"""

from __future__ import annotations

from typing import Any

from tilth.timeline.rewind.step_base import PlanView
from tilth.timeline.rewind.steps import (
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


def blank_record(plan: PlanView) -> dict[str, Any]:
    """The flat record of ``plan``'s header, every step's keys at their defaults (the order
    of the keys is the order older Tilths wrote them in)."""
    return {
        "op": plan.op,
        "op_id": plan.op_id,
        "session_id": plan.session_id,
        "target": plan.target,
        "target_label": plan.target_label,
        "scope": plan.scope,
        "worktree": plan.worktree,
        "head": None,
        "overlay": {},
        "keep": {},
        "force": False,
        "stash_message": None,
        "state": None,
        "threads": None,
        "event_offset": None,
        "keep_through_seq": None,
        "delete_paths": [],
        "note": None,
        "event": None,
        "before": None,
        "before_seq": None,
        "drop_seqs": [],
        "keep_seqs": None,
        "archive": None,
        "event_cut": None,
        "recorded": None,
        "unwind": None,
        "fork": None,
        "graft": None,
        "snapshot_code": False,
        "headline": plan.headline,
        "files": [],
        "commits_dropped": [],
        "commits_restored": [],
        "events_dropped": 0,
        "event_types": {},
        "task_changes": [],
        "messages_dropped": {},
        "threads_deleted": [],
        "checkpoints_dropped": 0,
        "conflicts": [],
        "details": list(plan.details),
        "warnings": list(plan.warnings),
    }


def _pairs(value: Any) -> tuple[tuple[str, str], ...]:
    return tuple((str(a), str(b)) for a, b in value or [])


def steps_of(data: dict[str, Any]) -> tuple[Step, ...]:
    """The steps a flat record describes (the conditions under which older Tilths ran
    each of them)."""
    steps: list[Step] = []
    archive = data.get("archive")
    if data.get("before") is not None and data.get("before_seq") is not None:
        steps.append(RecordUndo(str(data["before"]), int(data["before_seq"])))
    if data.get("stash_message") is not None:
        steps.append(Stash(str(data["stash_message"])))
    if data.get("head") is not None or data.get("snapshot_code"):
        steps.append(
            RestoreCode(
                data.get("head"),
                dict(data.get("overlay") or {}),
                dict(data.get("keep") or {}),
                bool(data.get("force")),
                bool(data.get("snapshot_code")),
                _pairs(data.get("files")),
                _pairs(data.get("commits_dropped")),
                _pairs(data.get("commits_restored")),
                tuple(str(c) for c in data.get("conflicts") or []),
                data.get("recorded"),
            )
        )
    if data.get("unwind") is not None:
        steps.append(Unwind(str(data["unwind"])))
    if data.get("state") is not None:
        changes = tuple((str(t), str(a), str(b)) for t, a, b in data.get("task_changes") or [])
        steps.append(RestoreState(dict(data["state"]), changes, archive))
    if data.get("threads") is not None:
        deleted = tuple(str(k) for k in data.get("threads_deleted") or [])
        dropped = dict(data.get("messages_dropped") or {})
        steps.append(CutThreads(dict(data["threads"]), dropped, deleted, archive))
    note = data.get("note")
    if isinstance(note, dict):
        steps.append(AddNote(str(note["thread"]), str(note["text"])))
    if data.get("delete_paths"):
        steps.append(DeletePaths(tuple(str(p) for p in data["delete_paths"])))
    if data.get("event_offset") is not None:
        types = dict(data.get("event_types") or {})
        steps.append(
            CutEvents(
                int(data["event_offset"]),
                int(data.get("events_dropped") or 0),
                types,
                archive,
                data.get("event_cut"),
            )
        )
    keep_seqs = data.get("keep_seqs")
    if data.get("keep_through_seq") is not None or keep_seqs is not None:
        steps.append(
            DropCheckpoints(
                data.get("keep_through_seq"),
                tuple(int(s) for s in data.get("drop_seqs") or []),
                None if keep_seqs is None else tuple(int(s) for s in keep_seqs),
                archive,
                int(data.get("checkpoints_dropped") or 0),
            )
        )
    if data.get("fork") is not None:
        steps.append(MakeChild(dict(data["fork"])))
    event = data.get("event")
    if isinstance(event, dict):
        steps.append(LogEvent(str(event["type"]), dict(event.get("payload") or {})))
    if data.get("graft") is not None:
        # The same dict: the executor notes the graft's base in it (``graft-base``).
        steps.append(Graft(data["graft"]))
    return tuple(steps)
