"""Capturing a turn's code state: the ``ToolObserver`` that turn checkpoints are built from.

A turn checkpoint's code is ``head`` (a commit on the session branch) plus an *overlay*:
every file that differs from that commit at the end of the turn, as ``path → entry``
(``None`` when head has the file but the worktree does not). The tree at a checkpoint is
head's tree with the overlay applied, exactly, so a restore needs nothing that was not
captured at a turn boundary, and changes made by ``bash`` are restorable like edits.

Cost follows the change, not the repo: the candidates re-examined at a turn's end are the
previous overlay, the paths edit tools announced (``before_write``, first touch per path
per turn) and what the watcher saw change (inotify, or a stat scan after ``bash``). Each
is compared with head's blob id (one cached ``git ls-tree`` per head) and, when it
differs, stored in the shared blob store.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tilth import git
from tilth.errors import GitError
from tilth.session.store import Session
from tilth.timeline.faults import fault_point
from tilth.timeline.record import retention as gc
from tilth.timeline.record.blob_store import (
    BlobStore,
    Entry,
    FileState,
    git_blob_sha,
    max_file_bytes,
    read_state_in,
    register_root,
    remember_store,
    store_state,
)
from tilth.timeline.record.git_reads import GitId, IgnoreChecker, TreeCache, ignored_dirs, read_head
from tilth.timeline.record.turn_baseline import Baseline, save_baseline, saved_baseline
from tilth.timeline.record.turn_changes import BASH_GAP, TurnChanges, ignored_gap
from tilth.timeline.record.worktree_paths import entry_kind, expand_dirs

if TYPE_CHECKING:
    from tilth.config import Settings


def _rel_ok(rel: str) -> bool:
    return bool(rel) and rel != ".git" and not rel.startswith(".git/")


@dataclass
class TurnResult:
    """What ``finish_turn`` hands the recorder."""

    overlay: dict[str, Entry | None]
    files_changed: list[str]
    gaps: list[str]
    head: str
    bytes_stored: int = 0


def _git_id(state: FileState) -> GitId:
    if state.size is not None:  # only its start was read: never equal to a stored file's
        return state.git_mode, f"over-cap:{state.size}:{git_blob_sha(state.data)}"
    return state.git_mode, git_blob_sha(state.data)


_LIVE: weakref.WeakValueDictionary[Path, TurnCapture] = weakref.WeakValueDictionary()
"""The capture watching each worktree in this process (chat and the web UI keep one)."""


def live_capture(worktree: Path) -> TurnCapture | None:
    """The capture watching ``worktree`` in this process, if any (chat, the web UI)."""
    return _LIVE.get(worktree.resolve())


def live_changes(worktree: Path) -> set[str] | None:
    """What a live capture of ``worktree`` in this process saw change since its last turn;
    None when there is none (a new process: the caller walks the worktree instead)."""
    capture = live_capture(worktree)
    return None if capture is None else capture.changed_since_turn()


class TurnCapture:
    """The ``ToolObserver`` that records, per turn, which files changed and what they hold."""

    def __init__(
        self,
        session: Session | None,
        worktree: Path,
        store: BlobStore,
        *,
        cap: int | None = None,
        watch: bool = True,
    ) -> None:
        self.session = session
        self.root = worktree.resolve()
        self.store = store
        self.cap = max_file_bytes() if cap is None else cap
        self.trees = TreeCache(self.root)
        self.skip: set[str] = set()
        self._watch = watch
        self.changes = TurnChanges(
            self.root, ignored_dir=self._is_ignored_dir, skip_dirs=self._skip_dirs, keep=_rel_ok
        )
        self._ignore: IgnoreChecker | None = None
        self._ready = False
        self._auto_gc = False
        self._settings: Settings | None = None
        self.baseline = Baseline("")

    @classmethod
    def for_session(
        cls, session: Session, worktree: Path, settings: Settings | None = None
    ) -> TurnCapture:
        """A capture for ``session`` storing into the snapshots of ``settings``' home
        (``$TILTH_HOME/snapshots`` by default); set up lazily."""
        from tilth.config import load_settings

        settings = settings or load_settings()
        capture = cls(session, worktree, BlobStore.for_home(settings.home))
        capture._auto_gc = True
        capture._settings = settings
        return capture

    def _ensure(self) -> TurnResult | None:
        """Take stock on first use: ignored dirs, the current state, the watcher."""
        return None if self._ready else self.resync()

    # ---- the ToolObserver seam ------------------------------------------------------------
    def before_write(self, path: Path) -> None:
        """An edit tool is about to write ``path``: remember it (first touch per turn)."""
        try:
            self._ensure()
        except (GitError, OSError):
            self._ready = False  # the turn's end compares the whole worktree instead
        self.changes.wrote(path)

    def before_bash(self, command: str) -> None:
        """Drain what changed so far, so the command's own changes are told apart."""
        try:
            if self._ensure() is None:
                self.changes.drain()
        except (GitError, OSError):
            self._ready = False

    def after_bash(self, command: str) -> None:
        """Collect every path the command created, modified or deleted inside the worktree."""
        self.changes.ran(command)
        try:
            self._ensure()
            self.changes.drain(after_bash=True)
        except (GitError, OSError):
            self._ready = False

    # ---- turn boundaries ----------------------------------------------------------------
    def finish_turn(self) -> TurnResult:
        """The turn's overlay, changed files and coverage gaps; starts the next turn.

        A capture problem never stops the run: the turn is recorded without files and
        says why, and the next turn starts from a full comparison with HEAD.
        """
        had_bash = bool(self.changes.commands)
        try:
            return self._finish()
        except (GitError, OSError) as exc:
            self._ready = False
            self.changes.clear()
            gaps = [f"turn snapshot failed, files of this turn not captured: {exc}"]
            return TurnResult({}, [], [*gaps, BASH_GAP] if had_bash else gaps, head="")

    def _finish(self) -> TurnResult:
        had_bash = bool(self.changes.commands)
        first = self._ensure()
        if first is not None:
            # Nothing was observed before: the full comparison is the answer.
            if had_bash:
                first.gaps.append(BASH_GAP)
            return first
        changes = self.changes
        changes.drain()
        head = read_head(self.root)
        base = self.baseline
        candidates = changes.candidates()
        carried: set[str] = set()
        if changes.watcher_kind == "inotify" and head == base.head:
            # The kernel reported every change, so overlay files it did not mention are as
            # they were: carry their entries over without reading them again.
            carried = set(base.overlay) - candidates
        else:
            candidates |= set(base.overlay)
        if head != base.head:
            candidates |= self._paths_between(base.head, head)
        if changes.full_scan:
            candidates |= self._status_paths()
            carried -= candidates
        result = self._evaluate(head, candidates, carried)
        fault_point("capture")  # tests: killed after storing, before the checkpoint is written
        result.gaps += changes.clear()
        return result

    def resync(self) -> TurnResult:
        """Recompute the state from scratch (at start, and after a restore changed the tree)."""
        if not self._ready:
            self._ready = True
            self.skip = ignored_dirs(self.root)
            self._first_use()
        self.changes.drain()
        self.changes.clear()
        head = read_head(self.root)
        # Compared with the last turn recorded (by this or an earlier process), so a first
        # turn reports what changed since, not every file that differs from HEAD.
        self.baseline = saved_baseline(self.session, head)
        result = self._evaluate(head, self._status_paths() | set(self.baseline.overlay))
        if self._watch and self.changes.watcher is None:
            self.changes.watch()
        _LIVE[self.root] = self
        return result

    def changed_since_turn(self) -> set[str] | None:
        """Every path that may have changed since the last turn ended (or the last resync),
        when the kernel's change feed is live; None when only a walk could tell."""
        if not self._ready or not self.changes.live:
            return None
        self.changes.drain()
        return self.changes.candidates() if self.changes.live else None

    @property
    def watcher_kind(self) -> str:
        """``inotify``, ``scan`` or ``none`` (not set up yet, or watching turned off)."""
        return self.changes.watcher_kind

    def close(self) -> None:
        """Release the watcher's and the ignore checker's resources."""
        if _LIVE.get(self.root) is self:
            del _LIVE[self.root]
        self.changes.close()
        if self._ignore is not None:
            self._ignore.close()
            self._ignore = None

    # ---- internals --------------------------------------------------------------------------
    def claim_store(self) -> None:
        """Record this capture's store as the session's, and tell retention where the
        session lives, so every later go-back of the session finds its blobs there."""
        if self.session is not None:
            register_root(self.store, self.session.dir.parent)
            remember_store(self.session, self.store)

    def _first_use(self) -> None:
        """Claim the store; start a due collection in the background."""
        self.claim_store()
        if self._auto_gc:
            from tilth.config import load_settings

            gc.collect_in_background(self._settings or load_settings())

    def _status_paths(self) -> set[str]:
        return git.changed_paths(self.root)

    def _paths_between(self, old: str, new: str) -> set[str]:
        out = git.git(
            "diff", "--name-only", "-z", "--no-renames", old, new, cwd=self.root, check=False
        )
        return {p for p in out.split("\0") if p}

    def _expand(self, candidates: set[str], tree: dict[str, GitId]) -> set[str]:
        """Directory candidates (moved or deleted dirs) stand for every known file below;
        an ignored directory stands for itself (one gap line, never its contents)."""
        known = (tree, self.baseline.overlay)
        out = expand_dirs(self.root, candidates, known, self.skip.__contains__)
        return out | (candidates & self.skip)

    def _is_ignored_dir(self, rel: str) -> bool:
        return bool(self._ignored([rel]))

    def _skip_dirs(self) -> set[str]:
        return self.skip

    def _ignored(self, paths: list[str]) -> set[str]:
        if any(p == ".gitignore" or p.endswith("/.gitignore") for p in paths) and self._ignore:
            self._ignore.close()  # the rules changed: ask a fresh git
            self._ignore = None
        if self._ignore is None:
            self._ignore = IgnoreChecker(self.root)
        return self._ignore.ignored(paths)

    def _evaluate(
        self, head: str, candidates: set[str], carried: set[str] | None = None
    ) -> TurnResult:
        tree = self.trees.get(head)
        base = self.baseline
        base_tree = tree if base.head == head else self.trees.get(base.head)
        candidates = self._expand(candidates, tree)
        skipped = [
            p for p in candidates if p in self.skip or any(p.startswith(d + "/") for d in self.skip)
        ]
        new_paths = [p for p in candidates if p not in tree and p not in skipped]
        ignored = set(skipped) | (self._ignored(new_paths) if new_paths else set())
        overlay: dict[str, Entry | None] = {}
        ids: dict[str, GitId | None] = {}
        # Oversize files not looked at this turn stay as they were reported.
        oversize = {k: v for k, v in base.oversize.items() if k not in candidates}
        changed: list[str] = []
        gaps: list[str] = []
        ignored_hits: list[str] = []
        stored = 0
        dirs: dict[str, bool] = {}
        for rel in sorted((carried or set()) - candidates):
            entry = base.overlay[rel]
            if entry is None or self.store.has(entry):
                overlay[rel], ids[rel] = entry, base.ids.get(rel)
            else:
                candidates.add(rel)  # its blob was collected meanwhile: store it again
        for rel in sorted(candidates):
            if rel in ignored:
                if entry_kind(self.root, rel) is not None or rel in base.overlay:
                    ignored_hits.append(rel)
                continue
            state = read_state_in(self.root, rel, dirs, self.cap)
            now: GitId | None = _git_id(state) if state is not None else None
            if rel in base.overlay:
                before = base.ids[rel]
            else:
                before = base.oversize.get(rel) or base_tree.get(rel)
            if now != before:
                changed.append(rel)
            if now == tree.get(rel):
                continue
            if state is None:
                overlay[rel], ids[rel] = None, None
                continue
            reused = base.overlay.get(rel)
            if reused and base.ids.get(rel) == now and self.store.has(reused):
                overlay[rel], ids[rel] = reused, now  # unchanged: no re-store
                continue
            outcome = store_state(self.store, rel, state, self.cap)
            if outcome.entry is None:
                assert now is not None
                if base.oversize.get(rel) != now:
                    # Reported once, in the turn it changed; later turns say nothing of it.
                    gaps.append(outcome.gap or f"not captured: {rel}")
                oversize[rel] = now
                continue
            stored += outcome.size
            overlay[rel], ids[rel] = outcome.entry, now
            if state.kind == "l":
                target = (self.root / rel).parent / os.fsdecode(state.data)
                if not _inside(target, self.root):
                    gaps.append(f"symlink points outside the workspace, target not captured: {rel}")
        if ignored_hits:
            gaps.append(ignored_gap(ignored_hits))
        self.store.sync()
        self.baseline = Baseline(head, overlay, ids, oversize)
        save_baseline(self.session, self.baseline)
        return TurnResult(overlay, changed, gaps, head, stored)


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):
        return False
