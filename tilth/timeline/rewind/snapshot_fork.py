"""Forking a session without git (a chat): a new chat in a new directory of its own.

The parent works directly in the user's directory, which the fork must not share. The
fork gets ``sessions/<new>/workspace/`` holding the checkpoint's files (every captured
file of the directory at that instant, written from snapshots), the session files cut
to the checkpoint as any fork's are, and ``kind: "chat"`` with that directory as its
workspace, so ``tilth chat --resume <new>`` continues there. A chat checkpoint is the
instant before its turn, so the fork's timeline ends just before the target: the turn
did not happen in the fork. Ignored paths (``node_modules/``, ``.venv/``...) and ``.git``
are not captured, so they are not in the fork's directory.
"""

from __future__ import annotations

from pathlib import Path

from tilth.session.events import utc_now
from tilth.session.files import atomic_write_json
from tilth.session.store import CHECKPOINT_SCHEMA, Session
from tilth.timeline.faults import fault_point
from tilth.timeline.record.checkpoints import Checkpoint, delete_after, list_checkpoints
from tilth.timeline.record.dir_recorder import write_code_state
from tilth.timeline.rewind.fork import ForkResult, _copy_files
from tilth.timeline.rewind.journal import log_operation
from tilth.timeline.rewind.plan import new_op_id
from tilth.timeline.rewind.snapshot_restore import materialize


def fork_snapshot_session(parent: Session, target: Checkpoint, sessions_dir: Path) -> ForkResult:
    """Make the new chat session and its directory. The caller holds the parent's lock."""
    info = parent.checkpoint()
    child = Session.create(
        sessions_dir,
        Path("."),
        status="failed",
        fork_incomplete=True,
        parent_session=parent.id,
        kind="chat",
    )
    fault_point("fork-created")
    seqs = [c.seq for c in list_checkpoints(parent) if c.seq <= target.seq and not c.is_before]
    _copy_files(parent, child, target, seqs)
    delete_after(child, target.seq - 1)
    fault_point("fork-files")
    directory = child.workspace_dir
    materialize(parent, target.head, target.overlay, directory)
    write_code_state(child, target.head, dict(target.overlay))
    fault_point("fork-worktree")
    op_id = new_op_id()
    record = {k: v for k, v in info.items() if k != "fork_incomplete"}
    record.update(
        {
            "schema": CHECKPOINT_SCHEMA,
            "session_id": child.id,
            "kind": "chat",
            "source": str(directory),
            "workspace": str(directory),
            "branch": None,
            "started_at": utc_now(),
            "status": "all_done",
            "tokens_used": int(target.state.get("tokens_used") or 0),
            "parent_session": parent.id,
            "forked_from": {
                "session": parent.id,
                "checkpoint": target.id,
                "label": target.label,
                "head": target.head,
                "at": utc_now(),
            },
        }
    )
    atomic_write_json(child.checkpoint_path, record)
    child.log(
        "fork",
        role="child",
        parent_session=parent.id,
        checkpoint=target.id,
        label=target.label,
        head=target.head,
        op=op_id,
    )
    log_operation(
        parent,
        op_id,
        "fork",
        target=target.id,
        label=target.label,
        child_session=child.id,
        head=target.head,
    )
    return ForkResult(child, parent, target, directory)
