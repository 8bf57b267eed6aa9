"""Restoring a checkpoint's code exactly: head's tree with the overlay applied.

``plan_code(...)`` is pure reading: which files a restore would write or delete, and which
files the user changed since the latest recorded state (conflicts, left alone unless
forced). Given ``changed`` (a live change feed, or an empty set: "trust the record") it
reads only the files that differ between the recorded states and the target, so its cost
follows the change; without it, it walks the worktree once (``git status``) and lists
every edit made since. ``keep_conflicts`` stores the conflicts' current contents so the
plan can be journaled; ``apply_files`` then writes only the listed files (plus what moving
HEAD changes) and is idempotent — running it again after a crash gives the same tree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from tilth import git
from tilth.timeline.record.blob_store import (
    BlobStore,
    Entry,
    FileState,
    blob_id,
    git_blob_sha,
    read_state,
    read_state_in,
    split_entry,
    store_state,
    write_data,
    write_entry,
)
from tilth.timeline.record.git_reads import GitId, TreeCache, read_head

Overlay = dict[str, Entry | None]


@dataclass
class CodePlan:
    """What restoring a checkpoint's code changes in the worktree."""

    head: str
    overlay: Overlay
    restore: list[str] = field(default_factory=list)
    """Files whose content the restore writes (created or overwritten)."""
    delete: list[str] = field(default_factory=list)
    """Files the restore removes."""
    conflicts: list[str] = field(default_factory=list)
    """Files changed since the latest recorded state (by the user): kept unless forced."""
    keep: Overlay = field(default_factory=dict)
    """The conflicts' current contents, put back after the restore (see ``keep_conflicts``)."""
    force: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "head": self.head,
            "overlay": self.overlay,
            "restore": self.restore,
            "delete": self.delete,
            "conflicts": self.conflicts,
            "keep": self.keep,
            "force": self.force,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CodePlan:
        return cls(
            head=str(data["head"]),
            overlay=dict(data.get("overlay") or {}),
            restore=list(data.get("restore") or []),
            delete=list(data.get("delete") or []),
            conflicts=list(data.get("conflicts") or []),
            keep=dict(data.get("keep") or {}),
            force=bool(data.get("force")),
        )


def _changed_paths(worktree: Path, base: str, head: str) -> set[str]:
    """Paths where the worktree (untracked included, ignored not) differs from ``base``."""
    if base == head:
        # One walk of the tree instead of two.
        return git.changed_paths(worktree)
    tracked = git.git(
        "diff", "--name-only", "-z", "--no-renames", git.SUBMODULE_HEADS_ONLY, base, cwd=worktree
    )
    untracked = git.git("ls-files", "-z", "--others", "--exclude-standard", cwd=worktree)
    return {p for p in (tracked + "\0" + untracked).split("\0") if p}


def _same(
    state: FileState | None, entry: Entry | None, head_id: GitId | None, in_overlay: bool
) -> bool:
    """True when ``state`` equals the recorded state (overlay entry, else head's blob)."""
    if in_overlay:
        if entry is None or state is None:
            return entry is None and state is None
        blob, kind = split_entry(entry)
        return state.kind == kind and blob_id(state.data) == blob
    if state is None or head_id is None:
        return state is None and head_id is None
    return (state.git_mode, git_blob_sha(state.data)) == head_id


def _with_parents(overlay: Overlay) -> Overlay:
    """``overlay`` saying outright that no file stands where its files' directories are.

    A turn that replaces head's file ``p`` by a directory holding ``p/b`` may record only
    ``p/b``; read literally, ``p`` would still be head's file, and the directory a user's
    edit (a false conflict that, kept, deletes the restored file).
    """
    parents: set[str] = set()
    for rel, entry in overlay.items():
        cut = rel.rfind("/")
        # Plain string cuts (a restore's plan runs this over every overlay entry).
        while entry is not None and cut > 0 and rel[:cut] not in parents:
            parents.add(rel[:cut])
            cut = rel.rfind("/", 0, cut)
    if not parents - overlay.keys():
        return overlay
    return {**{rel: None for rel in parents if rel not in overlay}, **overlay}


def plan_code(
    worktree: Path,
    target_head: str,
    target_overlay: Overlay,
    latest_head: str | None = None,
    latest_overlay: Overlay | None = None,
    *,
    force: bool = False,
    trees: TreeCache | None = None,
    changed: set[str] | None = None,
) -> CodePlan:
    """The files restoring (target_head, target_overlay) writes, deletes, and conflicts with.

    ``latest_*`` is the newest recorded state ("what the agent last wrote"); a file whose
    current content differs from it is a conflict. Without it there are no conflicts.

    ``changed`` — every path that may have changed since that latest state, as a live change
    feed knows it (``turn_capture.live_changes``) — spares the walk of the whole worktree:
    the plan then costs what differs, not the size of the repository. None walks.
    """
    trees = trees or TreeCache(worktree)
    target_overlay = _with_parents(target_overlay)
    if latest_overlay is not None:
        latest_overlay = _with_parents(latest_overlay)
    plan = CodePlan(target_head, dict(target_overlay), force=force)
    head_now = read_head(worktree)
    current_states: dict[str, FileState | None] = {}
    dirs: dict[str, bool] = {}

    def current(rel: str) -> FileState | None:
        if rel not in current_states:
            current_states[rel] = read_state_in(worktree, rel, dirs)
        return current_states[rel]

    diffs: dict[str, set[str]] = {}

    def changed_since(base: str) -> set[str]:
        if base not in diffs:
            if changed is not None and latest_head is not None:
                # The worktree differs from head_now only where the latest state's overlay
                # or the feed says so (or where head moved since that state was recorded).
                moved = git.paths_between(worktree, latest_head, head_now)
                dirty = changed | set(latest_overlay or {}) | moved
                diffs[base] = dirty | git.paths_between(worktree, base, head_now)
            else:
                diffs[base] = _changed_paths(worktree, base, head_now)
        return diffs[base]

    relevant = changed_since(target_head) | set(target_overlay)
    unchanged: set[str] = set()
    if changed is not None and latest_head == target_head == head_now and latest_overlay:
        # Not walking: a file both states hold the same blob of is not written, so it
        # need not be read (an edit the feed saw is in ``changed`` and still looked at).
        both = latest_overlay.keys() & target_overlay.keys()
        unchanged = {p for p in both if latest_overlay[p] == target_overlay[p]} - changed
        relevant -= unchanged
    latest_tree: dict[str, GitId] = {}
    if latest_head is not None:
        latest_overlay = latest_overlay or {}
        suspects = (changed_since(latest_head) | set(latest_overlay)) - unchanged
        if latest_head == target_head or changed is not None:
            # Every file the plan may write is checked for an edit since the latest state
            # (a walk found them all already; without one, these are the ones that matter).
            # With the same head, one tree read answers both questions.
            suspects |= relevant
        latest_tree = trees.entries(latest_head, suspects)
        for rel in sorted(suspects):
            if not _same(
                current(rel), latest_overlay.get(rel), latest_tree.get(rel), rel in latest_overlay
            ):
                plan.conflicts.append(rel)
    same = latest_head == target_head and latest_head is not None
    target_tree = latest_tree if same else trees.entries(target_head, relevant)
    for rel in sorted(relevant):
        if not force and rel in plan.conflicts:
            continue
        state = current(rel)
        in_overlay = rel in target_overlay
        if _same(state, target_overlay.get(rel), target_tree.get(rel), in_overlay):
            continue
        wanted_absent = target_overlay[rel] is None if in_overlay else rel not in target_tree
        (plan.delete if wanted_absent else plan.restore).append(rel)
    absent = {rel for rel in plan.restore if current(rel) is None}
    _blocked(plan, worktree, relevant, absent, dirs)
    return plan


def _blocked(
    plan: CodePlan, worktree: Path, relevant: set[str], absent: set[str], seen: dict[str, bool]
) -> None:
    """A file to restore where a directory of files the plan keeps stands, or under a
    directory where a kept file (or a file of the user's the plan never looked at) stands:
    writing it would delete those. Unforced, they are conflicts and the restore skips what
    they block; forced, they are deleted (and listed as overwritten). ``seen`` is the plan's
    cache of which parents are real directories (``read_state_in``)."""
    dirs: dict[str, bool] = {}
    skipped: set[str] = set()
    for rel in plan.restore:
        under = _files_under(worktree, rel) if rel in absent else []
        inside = [f for f in under if f not in plan.delete]
        if inside:  # a directory where the file goes, holding files the plan keeps
            plan.conflicts.extend(f for f in inside if f not in plan.conflicts)
            if not plan.force:
                skipped.add(rel)
            continue
        for parent in (str(p) for p in reversed(PurePosixPath(rel).parents)):
            if parent == ".":
                continue
            if parent in plan.conflicts:
                if not plan.force:
                    skipped.add(rel)
                break
            if parent not in dirs:
                found = read_state_in(worktree, parent, seen)
                dirs[parent] = found is None
            if dirs[parent]:
                continue  # a directory, or nothing (a later parent may still be a file)
            if parent in relevant:
                break  # the plan writes or deletes it itself
            plan.conflicts.append(parent)
            if plan.force:
                plan.delete.append(parent)
            else:
                skipped.add(rel)
            break
    plan.restore = [rel for rel in plan.restore if rel not in skipped]
    plan.conflicts.sort()


def _files_under(worktree: Path, rel: str) -> list[str]:
    """The files and links below ``rel`` when it is a directory (else none)."""
    found = []
    for top, subdirs, names in os.walk(worktree / rel):
        for name in names + [d for d in subdirs if os.path.islink(os.path.join(top, d))]:
            found.append(Path(top, name).relative_to(worktree).as_posix())
    return found


def keep_conflicts(code: CodePlan, worktree: Path, store: BlobStore) -> CodePlan:
    """Store the conflicting files' current contents so ``apply_code`` can put them back."""
    if code.force:
        code.keep = {}
        return code
    for rel in code.conflicts:
        state = read_state(worktree / rel)
        if state is None:
            code.keep[rel] = None
            continue
        # Kept files are the user's: no size cap applies to them.
        stored = store_state(store, rel, state, cap=1 << 62)
        code.keep[rel] = stored.entry
    store.sync()
    return code


def apply_code(
    plan: CodePlan, worktree: Path, store: BlobStore, trees: TreeCache | None = None
) -> None:
    """Make the worktree equal the plan's target (kept files aside); safe to run twice."""
    files = [("delete", rel) for rel in plan.delete] + [("restore", rel) for rel in plan.restore]
    apply_files(worktree, plan.head, files, plan.overlay, plan.keep, store, trees)


def apply_files(
    worktree: Path,
    head: str,
    files: list[tuple[str, str]],
    overlay: Overlay,
    keep: Overlay,
    store: BlobStore,
    trees: TreeCache | None = None,
) -> None:
    """Make the code ``head`` + ``overlay`` by writing only what differs; safe to run twice.

    ``files`` are the plan's ``(restore | delete, path)``; moving HEAD adds the paths that
    differ between the two commits (their index entries follow, the rest of the index is
    untouched), except the user's kept files. No reset, no clean, no walk of the worktree:
    the cost follows the files that differ, not the size of the repository.
    """
    head_now = read_head(worktree)
    moved = git.paths_between(worktree, head_now, head)
    trees = trees or TreeCache(worktree)
    if head_now != head:
        # The index first, then HEAD: a crash between them is repaired by running again.
        git.reset_paths(worktree, head, moved)
        git.reset_soft(worktree, head)
    paths = {rel for _, rel in files} | {rel for rel in moved if not _tied(rel, keep)}
    from_git = trees.entries(head, {rel for rel in paths if rel not in overlay})
    blobs = git.read_blobs(worktree, [sha for _, sha in from_git.values()])
    gone = sorted(rel for rel in paths if overlay.get(rel, from_git.get(rel)) is None)
    for rel in gone:  # first, so a directory can become a file and the other way round
        write_entry(store, worktree, rel, None)
    for rel in sorted(set(paths) - set(gone)):
        if rel in overlay:
            write_entry(store, worktree, rel, overlay[rel])
        else:
            mode, sha = from_git[rel]
            write_data(worktree, rel, blobs[sha], GIT_KINDS.get(mode, "f"))


def _tied(rel: str, keep: Overlay) -> bool:
    """``rel`` is a kept file, lies under one, or is a directory holding one: writing it
    would change the user's kept file."""
    if rel in keep or any(str(p) in keep for p in PurePosixPath(rel).parents):
        return True
    return any(kept.startswith(rel + "/") for kept in keep)


GIT_KINDS = {"100755": "x", "120000": "l"}
"""Git file modes that are not a plain file, as blob-store kinds."""


def apply_overlay(worktree: Path, overlay: Overlay, store: BlobStore) -> None:
    """Write every overlay entry over the worktree (deletions first, so dirs can become files)."""
    for rel in sorted(p for p, e in overlay.items() if e is None):
        write_entry(store, worktree, rel, None)
    for rel in sorted(p for p, e in overlay.items() if e is not None):
        write_entry(store, worktree, rel, overlay[rel])
