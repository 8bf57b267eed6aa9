"""Bringing the winning attempt's task into its parent, as if it had run there.

The attempt forked from the parent's task-start checkpoint, and the parent did nothing
to the task since, so the attempt's branch is the parent's plus the task's stage
commits: the parent's branch moves forward to it (the same commits, each once). Its
task state, ledger and threads are the parent's plus what the task added, so they are
copied whole; its events after the fork are appended to the parent's log (the run's
own bookends left out), and its stage and turn checkpoints join the parent's timeline
with new numbers and offsets into the parent's log. ``restart --from``, ``rewind`` and
``reset --to-seed`` then work on the task as on one run in place.
"""

from __future__ import annotations

import json
import shutil
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path

from tilth import git
from tilth.errors import TilthError
from tilth.session.events import iter_lines
from tilth.session.store import Session
from tilth.timeline.record.checkpoints import (
    highest_seq,
    list_checkpoints,
    write_checkpoint,
)

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
                shutil.copy2(path, parent.dir / "threads" / path.name)


def copy_events(parent: Session, child: Session) -> _LogMap:
    """Append the attempt's task events (after its fork) to the parent's log."""
    log = parent.events
    mapping = _LogMap(base_offset=log.size(), base_seq=_last_seq(parent))
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


def copy_checkpoints(parent: Session, child: Session, after_seq: int, mapping: _LogMap) -> int:
    """The attempt's stage and turn checkpoints after ``after_seq``, renumbered into the
    parent's timeline; returns how many."""
    next_seq = highest_seq(parent) + 1
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


def graft(parent: Session, child: Session, task_id: str, start_seq: int, head: str) -> int:
    """Bring attempt ``child``'s work on ``task_id`` into ``parent``: its branch moved to
    ``head``, the task's files, events and checkpoints; returns the checkpoints copied."""
    move_branch(parent, head)
    copy_task_files(parent, child, task_id)
    mapping = copy_events(parent, child)
    return copy_checkpoints(parent, child, start_seq, mapping)


def placeholder_files(parent: Session, placeholder: str) -> None:
    """Write the files of a FAILED placeholder commit into the parent's worktree (not
    committed: the parent's own loop commits its placeholder with them)."""
    worktree: Path = parent.workspace_dir
    git.git("checkout", placeholder, "--", ".", cwd=worktree)
