"""The plan of one go-back operation: what will change, as a value.

``RewindPlan`` holds both the *actions* the executor carries out (absolute
targets, so every step can be repeated after a crash) and the *report* a user
reads: files restored or deleted, commits dropped, events dropped, task status
changes, thread messages dropped and conflicts. ``render()`` is at once the
``--dry-run`` output and the confirmation text.
"""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any

from tilth.errors import TilthError
from tilth.session.migrations import upgrade
from tilth.session.schemas import SCHEMAS

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


@dataclass
class RewindPlan:
    """Everything one go-back operation will change, and how to carry it out."""

    op: str
    """``rewind``, ``restart``, ``reset_to_seed``, ``undo``, ``resume`` or ``fork``."""
    op_id: str
    session_id: str
    target: str
    """Checkpoint id (or ``seed`` for a reset without a seed checkpoint)."""
    target_label: str
    scope: str
    worktree: str
    # ---- actions (absolute, repeatable) ----
    head: str | None = None
    """Commit the code goes back to (only the listed files are written, HEAD moved; reset to
    the seed: ``git reset --hard`` + ``git clean -fd``); None leaves files alone."""
    overlay: dict[str, str | None] = field(default_factory=dict)
    """Uncommitted files of a turn checkpoint to write back over ``head``."""
    # ---- turn snapshots (filled by the planner from code_restore.plan_code / keep_conflicts) ----
    keep: dict[str, str | None] = field(default_factory=dict)
    """Files the user edited since the latest recorded state, written back after the restore."""
    force: bool = False
    """Overwrite the user's edits too (``tilth rewind --force``)."""
    stash_message: str | None = None
    """Stash uncommitted changes under this message before touching code."""
    state: dict[str, Any] | None = None
    """Harness state to restore (see ``record.state_capture.capture_state``); None leaves it."""
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
    # ---- undo (see rewind/undo.py) ----
    before: str | None = None
    """Kind of the checkpoint recording the state before this operation (``before-rewind``);
    None records none (reset to the seed, fork, dry runs of plans that change nothing)."""
    before_seq: int | None = None
    """The sequence number that checkpoint gets (fixed at plan time, so a retry reuses it)."""
    drop_seqs: list[int] = field(default_factory=list)
    """Checkpoints this operation deletes (kept in the undo archive)."""
    keep_seqs: list[int] | None = None
    """Undo: exactly the (non-``before-``) checkpoints to keep; others are deleted."""
    archive: str | None = None
    """Undo: the session-relative archive whose threads, ledgers and log tail come back."""
    event_cut: int | None = None
    """Undo: cut the log here, then append the archive's log tail."""
    recorded: dict[str, Any] | None = None
    """Undo: ``{head, overlay}``, what the agent had written when the undo point was taken.
    Noted beside the restored tree (``rewind.code_state``), so the user's files in that tree
    stay the user's for the go-backs that follow."""
    # ---- resume's preparation ----
    unwind: str | None = None
    """``git reset --soft`` to this commit (the FAILED placeholder's parent)."""
    # ---- fork ----
    fork: dict[str, Any] | None = None
    """``{child, sessions_dir, source, branch, workspace, checkpoint, copy_seqs}`` of the new
    session; ``kind: "chat"`` for a chat's fork (a directory of its own, no branch)."""
    graft: dict[str, Any] | None = None
    """A fork's work on one task brought into this session after the rest of the plan
    (``rewind.graft.graft_spec``: a best-of-N winner, ``tilth attempts --pick``)."""
    snapshot_code: bool = False
    """Code is restored from file snapshots only: no git reset, no commits (chat sessions)."""
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
        """JSON-able: the journal's copy of the plan, and the web API's dry run."""
        return {"schema": PLAN_SCHEMA, **asdict(self)}

    def preview(self) -> RewindPlan:
        """This plan as shown by a dry run, which never carries it out.

        A fork's plan reserves the new session's id for the executor; a dry run throws the
        plan away, so a fork made later gets another id. The preview shows ``NEW_ID`` (and
        ``fork.child`` None) instead of an id that will never exist. Other plans are shown as
        they are; a plan shown and then executed (``execute_fork``) keeps its real id.
        """
        child = str(self.fork.get("child") or "") if self.fork else ""
        if not child or self.fork is None:
            return self

        def hidden(text: str) -> str:
            return text.replace(child, NEW_ID)

        fork = {k: hidden(v) if isinstance(v, str) else v for k, v in self.fork.items()}
        fork["child"] = None
        details = [hidden(line) for line in self.details]
        details.append(f"{NEW_ID}: the new session's id is assigned when the fork is made")
        return replace(self, headline=hidden(self.headline), details=details, fork=fork)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RewindPlan:
        """Read a plan back (any schema up to this one: later fields default)."""
        data = upgrade("plan", data, where="the rewind journal's plan")
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        for key in ("files", "commits_dropped", "commits_restored", "task_changes"):
            values[key] = [tuple(item) for item in values.get(key) or []]
        return cls(**values)

    @property
    def changes_code(self) -> bool:
        return self.head is not None or self.snapshot_code

    @property
    def changes_anything(self) -> bool:
        """False for a plan whose execution would only log that it ran."""
        return bool(
            self.changes_code
            or self.unwind
            or self.state is not None
            or self.threads is not None
            or self.event_offset is not None
            or self.keep_through_seq is not None
            or self.delete_paths
            or self.fork
            or self.graft
        )

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
        """The plan in words: the ``--dry-run`` output and the confirmation text.

        ``undo_with`` names how the person reading it undoes the go-back (a chat: ``/undo``).
        """
        lines = [self.headline or f"{self.op} session {self.session_id} to {self.target}"]
        lines += [f"  {d}" for d in self.details]
        if self.head is not None and self.head.startswith("manifest:"):
            lines.append("code: files written back from snapshots (no git)")
            lines += _listing("  files", [f"{a:7} {p}" for a, p in self.files], "unchanged")
        elif self.head is not None:
            how = (
                "git reset --hard + clean -fd"
                if self.op == "reset_to_seed"
                else "only the files listed are written; HEAD moves with git reset --soft"
            )
            lines.append(f"code: reset the worktree to {self.head[:12]} ({how})")
            lines += _listing("  files", [f"{a:7} {p}" for a, p in self.files], "unchanged")
            lines += _listing(
                "  commits dropped", [f"{s[:10]} {m}" for s, m in self.commits_dropped], "none"
            )
            if self.commits_restored:
                lines += _listing(
                    "  commits restored", [f"{s[:10]} {m}" for s, m in self.commits_restored], ""
                )
        elif self.snapshot_code:
            lines.append("code: files restored from snapshots (no git)")
            lines += _listing("  files", [f"{a:7} {p}" for a, p in self.files], "unchanged")
        elif self.unwind is not None:
            lines.append(
                f"code: unwind the FAILED placeholder commit (git reset --soft {self.unwind[:12]});"
                " its changes stay in the worktree"
            )
        elif self.fork is None:
            lines.append("code: files are kept as they are")
        if self.event_offset is not None:
            kinds = ", ".join(f"{t} x{n}" for t, n in sorted(self.event_types.items()))
            lines.append(
                f"events: {self.events_dropped} dropped" + (f" ({kinds})" if kinds else "")
            )
        if self.state is not None and self.state.get("prd") is not None:
            # (a chat has no tasks: no line about them)
            lines += _listing(
                "tasks", [f"{t}: {old} -> {new}" for t, old, new in self.task_changes], "unchanged"
            )
        if self.threads is not None:
            dropped = [
                f"{k}: {n} message(s)" for k, n in sorted(self.messages_dropped.items()) if n
            ]
            dropped += [f"{k}: whole thread deleted" for k in self.threads_deleted]
            # An undo brings the conversation back from its archive (said below), not "nothing".
            if dropped or self.archive is None:
                lines += _listing("conversation dropped", dropped, "nothing")
        if self.note:
            lines.append(f"conversation: a note is added to thread {self.note['thread']}")
        if self.keep_through_seq is not None:
            lines.append(f"checkpoints: {self.checkpoints_dropped} later checkpoint(s) deleted")
        if self.archive is not None:
            lines.append(
                "restored from the undo archive: the event log, conversation, ledgers and "
                "checkpoints as they were"
            )
        if self.delete_paths:
            lines.append("deleted: " + ", ".join(self.delete_paths))
        snapshots = self.snapshot_code or (self.head or "").startswith("manifest:")
        if self.conflicts and (self.keep or self.force or snapshots):
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
        if self.before is not None and self.before_seq is not None:
            lines.append(
                f"undo: the current state is kept as checkpoint cp-{self.before_seq:04d} "
                f"({self.before}); {undo_with} returns to it"
            )
        return "\n".join(lines)


def _listing(title: str, items: list[str], empty: str, limit: int = 20) -> list[str]:
    if not items:
        return [f"{title}: {empty}"] if empty else []
    out = [f"{title} ({len(items)}):"]
    out += [f"    {item}" for item in items[:limit]]
    if len(items) > limit:
        out.append(f"    ... and {len(items) - limit} more")
    return out
