"""The chat half of a fork (no git): its plan, its directory and its record.

A chat works directly in the user's directory, which the fork must not share. The
fork gets ``sessions/<new>/workspace/`` holding the checkpoint's files (every captured
file of the directory at that instant, written from snapshots), the session files cut
to the checkpoint as any fork's are, and ``kind: "chat"`` with that directory as its
workspace, so ``tilth chat --resume <new>`` continues there. A chat checkpoint is the
instant before its turn, so the fork's timeline ends just before the target: the turn
did not happen in the fork. Ignored paths (``node_modules/``, ``.venv/``...) and ``.git``
are not captured, so they are not in the fork's directory.

``rewind.fork`` plans every fork (a chat's too) and its steps (``rewind.fork_steps``)
call these; the executor runs them journaled in the parent like a git fork's.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tilth.session.store import Session
from tilth.timeline.record.checkpoints import Checkpoint
from tilth.timeline.record.dir_recorder import write_code_state
from tilth.timeline.rewind.snapshot_restore import materialize

CHAT = "chat"
"""The ``kind`` of a fork plan (``plan.fork["kind"]``) that makes a chat."""


def is_chat_fork(info: dict[str, Any]) -> bool:
    """True for the spec of a chat's fork (``steps.MakeChild``; a git fork's has no ``kind``)."""
    return info.get("kind") == CHAT


def make_chat_directory(
    parent: Session, child: Session, workspace: Path, target: Checkpoint
) -> None:
    """The fork's directory, written afresh from snapshots (so a retry after a crash never
    keeps a half-written file), pinned as the fork's recorded code state."""
    if workspace.is_dir() and workspace.resolve().is_relative_to(child.dir.resolve()):
        shutil.rmtree(workspace)
    materialize(parent, target.head, dict(target.overlay), workspace)
    write_code_state(child, target.head, dict(target.overlay))


def chat_record(record: dict[str, Any], workspace: Path, target: Checkpoint) -> dict[str, Any]:
    """A fork's ``checkpoint.json`` made a chat's: it works in its own directory, no branch."""
    return {
        **record,
        "kind": CHAT,
        "source": str(workspace),
        "workspace": str(workspace),
        "branch": None,
        "status": "all_done",
        "tokens_used": int(target.state.get("tokens_used") or 0),
    }
