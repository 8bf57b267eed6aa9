"""Bringing a fork's work on one task into its parent: the winner of best of N (SPEC §11).

The attempt forked from the parent's task-start checkpoint, and the parent did nothing
to the task since, so the attempt's branch is the parent's plus the task's stage
commits: the parent's branch moves forward to it (the same commits, each once). Its
task state, ledger and threads are the parent's plus what the task added, so they are
copied whole; its events after the fork are appended to the parent's log (the run's
own bookends left out), and its stage and turn checkpoints join the parent's timeline
with new numbers and offsets into the parent's log. ``restart --from``, ``rewind`` and
``reset --to-seed`` then work on the task as on one run in place.

A graft is a go-back step like the others: ``steps.Graft`` says what, and the executor
runs it through the journal (``graft-base``, ``graft-branch``, ``graft-files``,
``graft-log``), so a crash half-way is finished by the next ``resume`` or command that
takes the session. ``graft-base`` notes where the parent's log and timeline end; every
later step writes absolute values from there, so repeating one is harmless. A winner's
graft is an op of its own (``graft``); ``tilth attempts --pick`` adds it to its rewind.
"""

from __future__ import annotations

import json
import os
import shutil
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tilth import git
from tilth.errors import TilthError
from tilth.session.events import iter_lines
from tilth.session.store import Session
from tilth.timeline.record.checkpoints import (
    highest_seq,
    list_checkpoints,
    write_checkpoint,
)
from tilth.timeline.record.log_epoch import raise_epoch

RUN_BOOKENDS = frozenset(
    {
        "fork",
        "session_start",
        "session_resume",
        "sandbox",
        "environment",
        "setup",
        "stop",
        "task_done",
        "task_failed",
        "commit",
    }
)
"""An attempt's events its parent logs for itself (or that belong to the attempt's run)."""


class GraftError(TilthError):
    """The winning attempt cannot be brought into its parent."""


@dataclass
class _LogMap:
    """Where each copied event of the attempt's log landed in the parent's."""

    child_ends: list[int] = field(default_factory=list)
    parent_ends: list[int] = field(default_factory=list)
    child_seqs: list[int] = field(default_factory=list)
    parent_seqs: list[int] = field(default_factory=list)
    base_offset: int = 0
    base_seq: int = 0

    def offset(self, child_offset: int) -> int:
        """The parent offset just after the last copied event that ends by ``child_offset``."""
        index = bisect_right(self.child_ends, child_offset)
        return self.parent_ends[index - 1] if index else self.base_offset

    def seq(self, child_seq: int) -> int:
        index = bisect_right(self.child_seqs, child_seq)
        return self.parent_seqs[index - 1] if index else self.base_seq


def fork_end(child: Session) -> int:
    """The byte offset just after the attempt's own ``fork`` event."""
    for line, _, end, complete in iter_lines(child.events.path):
        if complete and b'"type": "fork"' in line and b'"role": "child"' in line:
            return end
    raise GraftError(f"attempt {child.id} has no fork event; it cannot be brought back")


def move_branch(parent: Session, to: str) -> None:
    """Move the parent's branch forward to ``to`` (its descendant) in its worktree."""
    worktree = parent.workspace_dir
    head = git.head(worktree)
    if head == to:
        return
    if not git.is_ancestor(head, to, worktree):
        raise GraftError(
            f"session {parent.id} moved on since its attempts forked ({head[:10]}); "
            "the winner's commits do not follow it",
            hint=f"`tilth attempts {parent.id}` lists the attempts; restart the task to retry",
        )
    git.git("merge", "--ff-only", "--quiet", to, cwd=worktree)


def copy_task_files(parent: Session, child: Session, task_id: str) -> None:
    """The attempt's task state, ledger and threads replace the parent's."""
    for relative in (f"tasks/{task_id}.json", f"ledger/{task_id}.jsonl"):
        src = child.dir / relative
        if src.is_file():
            (parent.dir / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, parent.dir / relative)
    threads = child.dir / "threads"
    if threads.is_dir():
        (parent.dir / "threads").mkdir(exist_ok=True)
        for path in threads.iterdir():
            if path.is_file():
                # Replaced, never rewritten in place: readers keep a parsed thread while
                # its file stays the same file (session/thread_cache.py).
                tmp = parent.dir / "threads" / f".{path.name}.graft"
                shutil.copy2(path, tmp)
                os.replace(tmp, parent.dir / "threads" / path.name)


def copy_events(parent: Session, child: Session, base_offset: int, base_seq: int) -> _LogMap:
    """Append the attempt's task events (after its fork) to the parent's log, which ends
    at ``base_offset`` with event ``base_seq``."""
    log = parent.events
    mapping = _LogMap(base_offset=base_offset, base_seq=base_seq)
    for line, _, end, complete in iter_lines(child.events.path, fork_end(child)):
        if not complete:
            break
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict) or record.get("type") in RUN_BOOKENDS:
            continue
        payload = record.get("payload")
        event = log.append(
            str(record.get("type")),
            payload if isinstance(payload, dict) else {},
            ts=str(record.get("ts") or "") or None,
        )
        mapping.child_ends.append(end)
        mapping.parent_ends.append(event.end)
        mapping.child_seqs.append(int(record.get("seq") or 0))
        mapping.parent_seqs.append(event.seq)
    return mapping


def copy_checkpoints(
    parent: Session, child: Session, after_seq: int, mapping: _LogMap, next_seq: int
) -> int:
    """The attempt's stage and turn checkpoints after ``after_seq``, renumbered into the
    parent's timeline from ``next_seq``; returns how many."""
    copied = 0
    for checkpoint in list_checkpoints(child):
        if checkpoint.seq <= after_seq or checkpoint.is_before or checkpoint.kind == "stop":
            continue
        checkpoint.seq = next_seq
        checkpoint.id = f"cp-{next_seq:04d}"
        checkpoint.event_offset = mapping.offset(checkpoint.event_offset)
        checkpoint.event_seq = mapping.seq(checkpoint.event_seq)
        write_checkpoint(parent, checkpoint)
        next_seq += 1
        copied += 1
    return copied


def _last_seq(session: Session) -> int:
    events = session.events.events()
    return events[-1].seq if events else 0


GRAFT_STEPS = ("graft-base", "graft-branch", "graft-files", "graft-log")


def graft_spec(
    child: Session,
    task_id: str,
    start_seq: int,
    head: str,
    *,
    status: str | None = None,
    placeholder: str | None = None,
    tokens: int | None = None,
    before: list[dict[str, Any]] | None = None,
    after: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The spec of a graft step (``steps.Graft``): bring ``child``'s ``task_id`` (forked at
    checkpoint ``start_seq``) in, the parent's branch moved to ``head``. ``status``: the
    task's new status; ``placeholder``: a FAILED commit whose files are written into the
    worktree (uncommitted); ``tokens``: added to the parent's count as it was before the graft;
    ``before``/``after``: ``{type, payload}`` events logged around the copied ones."""
    return {
        "child": child.id,
        "task_id": task_id,
        "start_seq": start_seq,
        "head": head,
        "status": status,
        "placeholder": placeholder,
        "tokens": tokens,
        "before": before or [],
        "after": after or [],
        "base": None,
    }


def _child(session: Session, spec: dict[str, Any]) -> Session:
    child_id = str(spec["child"])
    return Session(child_id, session.dir.parent / child_id)


def note_base(session: Session, spec: dict[str, Any], op_id: str) -> None:
    """Where the parent's log, events, timeline and token count end before the graft (the
    executor writes it into the journal: the later steps count from it)."""
    spec["base"] = {
        "offset": session.events.size(),
        "seq": _last_seq(session),
        "next_checkpoint": highest_seq(session) + 1,
        "tokens": session.tokens_used,
    }


def branch_step(session: Session, spec: dict[str, Any], op_id: str) -> None:
    move_branch(session, str(spec["head"]))


def files_step(session: Session, spec: dict[str, Any], op_id: str) -> None:
    """Task state, ledger and threads; the task's status, the placeholder's files, tokens."""
    task_id = str(spec["task_id"])
    copy_task_files(session, _child(session, spec), task_id)
    if spec.get("placeholder"):
        git.git("checkout", str(spec["placeholder"]), "--", ".", cwd=session.workspace_dir)
    status = spec.get("status")
    if status:
        tasks = session.tasks()
        changed = [t.with_status(str(status)) if t.id == task_id else t for t in tasks]
        if changed != tasks:
            session.save_tasks(changed)
    if isinstance(spec.get("tokens"), int):
        session.update_checkpoint(tokens_used=int(spec["base"]["tokens"]) + int(spec["tokens"]))


def log_step(session: Session, spec: dict[str, Any], op_id: str) -> None:
    """The parent's log cut back to the base, then the events and checkpoints brought in."""
    base = spec["base"]
    if session.events.size() > int(base["offset"]):
        session.events.truncate(int(base["offset"]))  # a crash half-way through this step
        raise_epoch(session.dir, op_id)
    for event in spec.get("before") or []:
        session.events.append(str(event["type"]), dict(event.get("payload") or {}))
    after_before = session.events.size()
    mapping = copy_events(session, _child(session, spec), after_before, _last_seq(session))
    for event in spec.get("after") or []:
        session.events.append(str(event["type"]), dict(event.get("payload") or {}))
    copy_checkpoints(
        session,
        _child(session, spec),
        int(spec["start_seq"]),
        mapping,
        int(base["next_checkpoint"]),
    )


STEPS: dict[str, Callable[[Session, dict[str, Any], str], None]] = {
    "graft-base": note_base,
    "graft-branch": branch_step,
    "graft-files": files_step,
    "graft-log": log_step,
}
"""The graft's journal steps (``GRAFT_STEPS``): ``(session, spec, op id)``."""
