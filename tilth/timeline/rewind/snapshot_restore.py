"""Restoring a plain directory's files to a checkpoint, from file snapshots only (no git).

The code half of a go-back for sessions without a branch (``tilth chat``). A checkpoint's
files are its manifest with its overlay applied (``dirstate.resolve_state``); so is the
newest state Tilth itself produced (the latest checkpoint, or ``code-state.json`` after
a turn ended or a restore ran). A restore changes exactly the paths where those two
differ, and only where the directory still holds what Tilth produced: a file that differs
from it was edited by someone else since (a conflict) and is left as it is unless forced.

``plan_dir_code`` only reads; ``apply_dir_code`` writes absolute contents, so running it
again after a crash gives the same directory. Paths are re-checked against the root, and
nothing outside the captured files (ignored paths, ``.git``) is ever touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilth.errors import TilthError
from tilth.session.store import Session
from tilth.timeline.record.blob_store import (
    BlobStore,
    Entry,
    read_state,
    session_store,
    write_entry,
)
from tilth.timeline.record.dir_recorder import write_code_state
from tilth.timeline.record.dir_state import entry_of, is_manifest_head, resolve_state
from tilth.timeline.rewind.code_restore import recorded_code_state


@dataclass
class DirCodePlan:
    """What restoring a checkpoint's files changes in the directory."""

    writes: dict[str, Entry | None] = field(default_factory=dict)
    """``path → entry`` the restore writes (``None`` deletes): exactly the changes."""
    conflicts: list[str] = field(default_factory=list)
    """Files edited outside the session since its newest recorded state."""
    force: bool = False

    @property
    def files(self) -> list[tuple[str, str]]:
        """``(restore | delete, path)``, sorted by path (the plan's report)."""
        return sorted(
            (("delete" if entry is None else "restore"), rel) for rel, entry in self.writes.items()
        )

    def to_dict(self) -> dict[str, Any]:
        return {"writes": self.writes, "conflicts": self.conflicts, "force": self.force}


def _inside(root: Path, rel: str) -> bool:
    if not rel or rel.startswith("/") or ".." in rel.split("/") or rel.split("/")[0] == ".git":
        return False
    try:
        return (root / rel).parent.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):
        return False


def plan_dir_code(
    session: Session,
    root: Path,
    target_head: str,
    target_overlay: dict[str, Entry | None],
    *,
    force: bool = False,
) -> DirCodePlan:
    """Which files restoring (target_head, target_overlay) writes or deletes, and conflicts."""
    if not is_manifest_head(target_head):
        raise TilthError(f"{target_head[:20]} is not a file manifest; this is a git checkpoint")
    if not root.is_dir():
        raise TilthError(
            f"the directory of session {session.id} is missing ({root})",
            hint="use --scope conversation to go back in the conversation only",
        )
    store = session_store(session)
    target = resolve_state(store, target_head, target_overlay)
    latest_head, latest_overlay = recorded_code_state(session)
    if is_manifest_head(latest_head):
        assert latest_head is not None
        latest = resolve_state(store, latest_head, latest_overlay)
    else:
        latest = target
    plan = DirCodePlan(force=force)
    for rel in sorted(set(target) | set(latest)):
        wanted, last = target.get(rel), latest.get(rel)
        if wanted == last or not _inside(root, rel):
            continue
        state = read_state(root / rel)
        now = entry_of(state) if state is not None else None
        if now != last:
            plan.conflicts.append(rel)
            if not force:
                continue
        if now != wanted:
            plan.writes[rel] = wanted
    return plan


def apply_dir_code(
    session: Session,
    root: Path,
    plan: DirCodePlan,
    target_head: str,
    target_overlay: dict[str, Entry | None],
    store: BlobStore | None = None,
) -> None:
    """Write the plan's files (deletions first); pin the target as the newest code state."""
    store = store or session_store(session)
    for rel in sorted(r for r, e in plan.writes.items() if e is None):
        if _inside(root, rel):
            write_entry(store, root, rel, None)
    for rel in sorted(r for r, e in plan.writes.items() if e is not None):
        if _inside(root, rel):
            write_entry(store, root, rel, plan.writes[rel])
    write_code_state(session, target_head, dict(target_overlay))


def state_before(
    session: Session, root: Path, plan: DirCodePlan
) -> tuple[str | None, dict[str, Entry | None]]:
    """The files as they are before ``plan`` runs, as (head, overlay): for an undo point.

    A restore touches only the planned paths, and those hold the newest recorded state
    unless they are forced conflicts, whose current contents are stored here. Every other
    file stays as it is, so this is exact for everything an undo has to put back.
    """
    head, overlay = recorded_code_state(session)
    overlay = dict(overlay)
    store = session_store(session)
    for rel in plan.conflicts:
        if not plan.force or rel not in plan.writes:
            continue
        state = read_state(root / rel)
        if state is None:
            overlay[rel] = None
        else:
            overlay[rel] = store.put(state.data) + ("" if state.kind == "f" else f":{state.kind}")
    store.sync()
    return head, overlay
