"""The pure half of going back: what a rewind, restart or reset will change.

``RewindPlan`` holds both the *actions* the executor carries out (absolute
targets, so every step can be repeated after a crash) and the *report* a user
reads: files restored or deleted, commits dropped, events dropped, task status
changes, thread messages dropped and conflicts. ``render()`` is at once the
``--dry-run`` output and the confirmation text. Planning never writes.
"""

from __future__ import annotations

import secrets
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tilth import git
from tilth.errors import TilthError, UsageError
from tilth.session.store import Session
from tilth.timeline.checkpoints import Checkpoint, stored_seqs
from tilth.timeline.harness import log_tail, task_statuses, worktree_of
from tilth.timeline.worktree import dirty_paths, tally_events, thread_drops, tree_changes

SCOPES = ("both", "code", "conversation")
PLAN_SCHEMA = 1


class RewindError(TilthError):
    """A rewind cannot be planned or carried out as asked."""


def new_op_id() -> str:
    """A unique, time-sortable id for one operation."""
    return f"op-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


@dataclass
class RewindPlan:
    """Everything one go-back operation will change, and how to carry it out."""

    op: str
    """``rewind``, ``restart`` or ``reset_to_seed``."""
    op_id: str
    session_id: str
    target: str
    """Checkpoint id (or ``seed`` for a reset without a seed checkpoint)."""
    target_label: str
    scope: str
    worktree: str
    # ---- actions (absolute, repeatable) ----
    head: str | None = None
    """Commit to ``git reset --hard`` to (then ``git clean -fd``); None leaves files alone."""
    overlay: dict[str, str | None] = field(default_factory=dict)
    """Uncommitted files of a turn checkpoint to write back over ``head``."""
    # ---- turn snapshots (filled by tilth.timeline.overlay.report_turn_code) ----
    keep: dict[str, str | None] = field(default_factory=dict)
    """Files the user edited since the latest recorded state, written back after the restore."""
    force: bool = False
    """Overwrite the user's edits too (``tilth rewind --force``)."""
    stash_message: str | None = None
    """Stash uncommitted changes under this message before touching code."""
    state: dict[str, Any] | None = None
    """Harness state to restore (see ``harness.capture_state``); None leaves it."""
    threads: dict[str, str | None] | None = None
    """Thread heads to truncate to (unlisted threads are deleted); None leaves threads."""
    event_offset: int | None = None
    """Cut ``events.jsonl`` here; None leaves the log."""
    keep_through_seq: int | None = None
    """Delete checkpoints with a higher sequence number; None keeps them all."""
    delete_paths: list[str] = field(default_factory=list)
    """Session-relative files or directories to delete."""
    note: dict[str, str] | None = None
    """``{thread, text}``: a message appended to a thread after a code-only restore."""
    event: dict[str, Any] | None = None
    """``{type, payload}`` appended to the event log after the cut."""
    # ---- report ----
    headline: str = ""
    files: list[tuple[str, str]] = field(default_factory=list)
    """``(restore | delete, path)`` for the worktree."""
    commits_dropped: list[tuple[str, str]] = field(default_factory=list)
    commits_restored: list[tuple[str, str]] = field(default_factory=list)
    events_dropped: int = 0
    event_types: dict[str, int] = field(default_factory=dict)
    task_changes: list[tuple[str, str, str]] = field(default_factory=list)
    messages_dropped: dict[str, int] = field(default_factory=dict)
    threads_deleted: list[str] = field(default_factory=list)
    checkpoints_dropped: int = 0
    conflicts: list[str] = field(default_factory=list)
    """Uncommitted changes in the worktree that no checkpoint holds (lost unless stashed)."""
    details: list[str] = field(default_factory=list)
    """Operation-specific lines (stages that will re-run, files deleted...)."""
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": PLAN_SCHEMA, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RewindPlan:
        values = {k: v for k, v in data.items() if k != "schema"}
        for key in ("files", "commits_dropped", "commits_restored", "task_changes"):
            values[key] = [tuple(item) for item in values.get(key) or []]
        return cls(**values)

    @property
    def changes_code(self) -> bool:
        return self.head is not None

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

    def render(self) -> str:
        """The plan in words: the ``--dry-run`` output and the confirmation text."""
        lines = [self.headline or f"{self.op} session {self.session_id} to {self.target}"]
        lines += [f"  {d}" for d in self.details]
        if self.head is not None:
            lines.append(
                f"code: reset the worktree to {self.head[:12]} (git reset --hard + clean -fd)"
            )
            lines += _listing("  files", [f"{a:7} {p}" for a, p in self.files], "unchanged")
            lines += _listing(
                "  commits dropped", [f"{s[:10]} {m}" for s, m in self.commits_dropped], "none"
            )
            if self.commits_restored:
                lines += _listing(
                    "  commits restored", [f"{s[:10]} {m}" for s, m in self.commits_restored], ""
                )
        else:
            lines.append("code: files are kept as they are")
        if self.event_offset is not None:
            kinds = ", ".join(f"{t} x{n}" for t, n in sorted(self.event_types.items()))
            lines.append(
                f"events: {self.events_dropped} dropped" + (f" ({kinds})" if kinds else "")
            )
        if self.state is not None:
            lines += _listing(
                "tasks", [f"{t}: {old} -> {new}" for t, old, new in self.task_changes], "unchanged"
            )
        if self.threads is not None:
            dropped = [
                f"{k}: {n} message(s)" for k, n in sorted(self.messages_dropped.items()) if n
            ]
            dropped += [f"{k}: whole thread deleted" for k in self.threads_deleted]
            lines += _listing("conversation dropped", dropped, "nothing")
        if self.note:
            lines.append(f"conversation: a note is added to thread {self.note['thread']}")
        if self.keep_through_seq is not None:
            lines.append(f"checkpoints: {self.checkpoints_dropped} later checkpoint(s) deleted")
        if self.delete_paths:
            lines.append("deleted: " + ", ".join(self.delete_paths))
        if self.conflicts and (self.keep or self.force):
            # Turn snapshots: conflicts are files edited since the latest recorded state.
            verb = (
                "OVERWRITTEN (--force)"
                if self.force
                else "kept as they are (edited since the last checkpoint; --force overwrites)"
            )
            lines += _listing(f"files you changed, {verb}", self.conflicts, "")
        elif self.conflicts:
            verb = "stashed" if self.stash_message else "LOST (not on any checkpoint)"
            lines += _listing(f"uncommitted changes, {verb}", self.conflicts, "")
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def _listing(title: str, items: list[str], empty: str, limit: int = 20) -> list[str]:
    if not items:
        return [f"{title}: {empty}"] if empty else []
    out = [f"{title} ({len(items)}):"]
    out += [f"    {item}" for item in items[:limit]]
    if len(items) > limit:
        out.append(f"    ... and {len(items) - limit} more")
    return out


# ---- shared report builders -----------------------------------------------------------------
def report_code(plan: RewindPlan, worktree: Path, head: str) -> None:
    """Fill the file, commit and conflict lines for a reset of ``worktree`` to ``head``."""
    current = git.head(worktree)
    plan.files = tree_changes(worktree, head)
    plan.commits_dropped = git.commits_between(head, current, worktree)
    plan.commits_restored = git.commits_between(current, head, worktree)
    plan.conflicts = dirty_paths(worktree)


def report_events(plan: RewindPlan, session: Session, offset: int, seq: int) -> None:
    """Fill the event lines for a cut of the log at ``offset`` (after event ``seq``)."""
    size, last_seq = log_tail(session.events.path)
    if offset > size:
        # Only possible when an earlier cut went below this checkpoint (a reset to the seed
        # cuts at seed_committed, before the seed checkpoint was recorded): nothing to cut.
        plan.warnings.append(
            f"the event log ({size} bytes) is already shorter than at this checkpoint "
            f"({offset} bytes); no events are dropped"
        )
        return
    plan.events_dropped = max(0, last_seq - seq) if last_seq else 0
    plan.event_types = tally_events(session.events.path, offset)
    if not plan.events_dropped:
        plan.events_dropped = sum(plan.event_types.values())


def report_state(plan: RewindPlan, session: Session, state: dict[str, Any]) -> None:
    """Fill the task status changes between now and ``state``."""
    from tilth.timeline.harness import capture_state

    now = task_statuses(capture_state(session).get("prd"))
    then = task_statuses(state.get("prd"))
    plan.task_changes = [
        (tid, now.get(tid, "-"), then[tid]) for tid in then if now.get(tid, "-") != then[tid]
    ]


def report_threads(plan: RewindPlan, session: Session, heads: dict[str, str | None]) -> None:
    plan.messages_dropped, plan.threads_deleted = thread_drops(session.threads.directory, heads)


def plan_rewind(
    session: Session, target: Checkpoint, scope: str, *, force: bool = False
) -> RewindPlan:
    """What ``tilth rewind --to <target> --scope <scope>`` will change (no writes)."""
    if scope not in SCOPES:
        raise UsageError(f"--scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    worktree = worktree_of(session)
    if scope != "conversation" and not worktree.is_dir():
        raise RewindError(
            f"the worktree of session {session.id} is missing ({worktree})",
            hint="use --scope conversation, or discard the session with `tilth reset`",
        )
    plan = RewindPlan(
        op="rewind",
        op_id=new_op_id(),
        session_id=session.id,
        target=target.id,
        target_label=target.label,
        scope=scope,
        worktree=str(worktree),
        headline=f"rewind session {session.id} to {target.id} ({target.label}), scope {scope}",
    )
    if scope in ("both", "code"):
        if git.rev_parse(target.head, worktree) is None:
            raise RewindError(
                f"the commit {target.head[:12]} of {target.id} no longer exists",
                hint="it may have been garbage-collected; pick a later checkpoint",
            )
        plan.head = target.head
        plan.overlay = dict(target.overlay)
        report_code(plan, worktree, target.head)
        # Turn snapshots: the exact file list, and conflicts = files the user edited since
        # the latest recorded state (kept unless --force). See tilth.timeline.overlay.
        from tilth.timeline.overlay import report_turn_code

        plan.force = force
        report_turn_code(plan, session, target.head, plan.overlay)
        plan.warnings += [f"{target.id}: {gap}" for gap in target.gaps]
    if scope in ("both", "conversation"):
        plan.state = dict(target.state)
        plan.threads = dict(target.threads)
        plan.event_offset = target.event_offset
        plan.keep_through_seq = target.seq
        plan.checkpoints_dropped = sum(1 for s in stored_seqs(session) if s > target.seq)
        report_state(plan, session, target.state)
        report_threads(plan, session, target.threads)
        report_events(plan, session, target.event_offset, target.event_seq)
    if scope == "code":
        thread = most_recent_thread(session)
        if thread is not None:
            plan.note = {
                "thread": thread,
                "text": f"[tilth] The files in the worktree were restored to checkpoint "
                f"{target.id} ({target.label}). The conversation was kept; files may differ "
                "from what earlier messages describe.",
            }
    plan.event = {
        "type": "rewind",
        "payload": {"to": target.id, "scope": scope, "op": plan.op_id},
    }
    return plan


def most_recent_thread(session: Session) -> str | None:
    """The thread written to last (by modification time), or None when there are none."""
    directory = session.threads.directory
    if not directory.is_dir():
        return None
    paths = list(directory.glob("*.jsonl"))
    if not paths:
        return None
    return max(paths, key=lambda p: (p.stat().st_mtime_ns, p.name)).stem


def counter_dict(counter: Counter[str]) -> dict[str, int]:
    return dict(sorted(counter.items()))
