"""Restoring a plain directory's files from file snapshots only: the code half without git.

Sessions that work directly in a directory (``tilth chat``) have no branch and must never
run git there. A checkpoint's files are its manifest with its overlay applied
(``dir_state.resolve_state``); a checkpoint that is not manifest-based (an undo point)
lists exactly the files it holds, on top of the newest recorded state. That newest state
is the one Tilth itself produced: ``code-state.json``, pinned at the end of every turn and
after every restore, or the latest manifest checkpoint when a turn was cut short.

A restore changes exactly the paths where the target and the newest recorded state
differ, and only where the directory still holds what Tilth produced: a file that differs
from it was edited by someone else since (a conflict) and is left as it is unless forced.
``plan_snapshot_files`` only reads; ``apply_snapshot_files`` writes absolute contents and
then pins the new recorded state, so running it again after a crash gives the same
directory. Paths are re-checked (relative, no ``..``); ignored paths and ``.git`` are
never touched, and nothing is read or written through a link: a link standing where the
target has a directory is a conflict unless the plan deletes it first, and is replaced,
never followed (``blob_store.write_entry``).
"""

from __future__ import annotations

import os
from pathlib import Path

from tilth.errors import SessionCorrupt
from tilth.session.files import read_json
from tilth.session.store import Session
from tilth.timeline.record.blob_store import (
    BlobStore,
    Entry,
    read_state,
    session_store,
    write_entry,
)
from tilth.timeline.record.checkpoints import list_checkpoints, timeline_dir
from tilth.timeline.record.dir_recorder import write_code_state
from tilth.timeline.record.dir_state import (
    Files,
    entry_of,
    is_manifest_head,
    load_manifest,
    resolve_state,
)
from tilth.timeline.record.worktree_paths import link_parent
from tilth.timeline.rewind.code_restore import CodePlan

Overlay = dict[str, Entry | None]


def is_snapshot_session(session: Session) -> bool:
    """True for a session whose code lives in file snapshots only (``kind: "chat"``)."""
    try:
        return session.record().kind == "chat"
    except SessionCorrupt:
        return False


def latest_recorded(session: Session) -> tuple[str, Overlay] | None:
    """The newest (manifest head, overlay) Tilth produced in this session, if any."""
    try:
        marker = read_json(timeline_dir(session) / "code-state.json", what="code-state.json")
    except (FileNotFoundError, SessionCorrupt):
        marker = None
    turns = [c for c in list_checkpoints(session) if is_manifest_head(c.head)]
    latest = turns[-1] if turns else None
    if isinstance(marker, dict) and is_manifest_head(marker.get("head")):
        if latest is None or int(marker.get("after_seq") or 0) >= latest.seq:
            return str(marker["head"]), dict(marker.get("overlay") or {})
    if latest is not None:
        return latest.head, dict(latest.overlay)
    return None


def _inside(rel: str) -> bool:
    """A path that names something in the directory: relative, no ``..``, not in ``.git``.
    Links below it are dealt with where files are read and written, never followed."""
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and ".." not in parts and parts[0] != ".git"


def _wanted(store: BlobStore, head: str, overlay: Overlay, latest: Files) -> Files:
    if is_manifest_head(head):
        return resolve_state(store, head, overlay)
    files = dict(latest)  # an undo point: the files it lists, over the recorded state
    for rel, entry in overlay.items():
        if entry is None:
            files.pop(rel, None)
        else:
            files[rel] = entry
    return files


def _shadowed(rel: str, files: Files) -> bool:
    """True when ``files`` holds a parent of ``rel`` as a file or link: then ``rel`` is not
    one of its files (a capture that followed a link recorded it); writing it would replace
    that link with a directory."""
    cut = rel.find("/")
    while cut != -1:
        if rel[:cut] in files:
            return True
        cut = rel.find("/", cut + 1)
    return False


def plan_snapshot_files(
    session: Session, root: Path, head: str, overlay: Overlay, *, force: bool = False
) -> CodePlan:
    """What restoring (head, overlay) in ``root`` writes: ``CodePlan.overlay`` holds exactly
    the writes (``None`` deletes), ``restore``/``delete`` list them, ``conflicts`` the files
    edited outside the session since (left alone unless ``force``)."""
    store = session_store(session)
    recorded = latest_recorded(session)
    latest = resolve_state(store, *recorded) if recorded else {}
    target = _wanted(store, head, overlay, latest)
    if recorded is None:
        latest = target  # nothing recorded to compare with: no conflicts can be told
    plan = CodePlan(head, {}, force=force)
    for rel in sorted(set(target) | set(latest) | set(overlay)):
        wanted, last = target.get(rel), latest.get(rel)
        if (wanted == last and rel not in overlay) or not _inside(rel):
            continue
        if wanted is not None and _shadowed(rel, target):
            wanted = None
        link = link_parent(root, rel)
        state = read_state(root / rel) if link is None else None
        now = entry_of(state) if state is not None else None
        # Under a link (or a file) this plan does not delete first, the directory holds no
        # such file: someone else put the link there, and only force replaces it.
        blocked = link is not None and (link not in plan.overlay or plan.overlay[link])
        if (now != last or blocked) and now != wanted:
            plan.conflicts.append(rel)
            if not force:
                continue
        if now != wanted:
            plan.overlay[rel] = wanted
            (plan.delete if wanted is None else plan.restore).append(rel)
    return plan


def apply_snapshot_files(
    session: Session, root: Path, writes: Overlay, store: BlobStore | None = None
) -> None:
    """Write ``writes`` (deletions first) and pin the result as the newest recorded state."""
    store = store or session_store(session)
    # write_entry never goes through a link: one standing where a directory must be is
    # removed first, and nothing below one is deleted.
    for rel in sorted(r for r, e in writes.items() if e is None):
        if _inside(rel):
            write_entry(store, root, rel, None)
    _remove_emptied(root, [r for r, e in writes.items() if e is None and _inside(r)])
    for rel in sorted(r for r, e in writes.items() if e is not None):
        if _inside(rel):
            write_entry(store, root, rel, writes[rel])
    recorded = latest_recorded(session)
    if recorded is None:
        return
    head, overlay = recorded
    base = load_manifest(store, head)
    for rel, entry in writes.items():
        if entry == base.get(rel):
            overlay.pop(rel, None)
        else:
            overlay[rel] = entry
    write_code_state(session, head, overlay)


def _remove_emptied(root: Path, deleted: list[str]) -> None:
    """Remove the directories the deletions left empty, deepest first, never ``root``.

    Snapshots hold files, not directories: a directory a later turn made (and filled)
    goes with its files. ``rmdir`` removes only an empty directory, and never follows a link.
    """
    parents: set[str] = set()
    for rel in deleted:
        parent = rel.rpartition("/")[0]
        while parent:
            parents.add(parent)
            parent = parent.rpartition("/")[0]
    for rel in sorted(parents, key=lambda p: p.count("/"), reverse=True):
        if link_parent(root, f"{rel}/-") is not None:
            continue  # below a link: what it points at is not this directory's to change
        try:
            os.rmdir(root / rel)
        except OSError:
            pass  # not empty, not a directory, or gone already


def materialize(session: Session, head: str, overlay: Overlay, target_dir: Path) -> int:
    """Write every file of (head, overlay) into the empty ``target_dir`` (a fork's copy)."""
    store = session_store(session)
    files = resolve_state(store, head, overlay)
    files = {rel: e for rel, e in files.items() if _inside(rel) and not _shadowed(rel, files)}
    target_dir.mkdir(parents=True, exist_ok=True)
    for rel in sorted(files):
        write_entry(store, target_dir, rel, files[rel])
    return len(files)
