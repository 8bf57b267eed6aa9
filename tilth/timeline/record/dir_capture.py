"""Capturing a plain directory's files per turn, without git: the chat's ``ToolObserver``.

The third seed's design (snapshot before an edit tool writes, first touch per path per
turn, ``None`` meaning "did not exist") needs the content a file had before it changed.
Edit tools announce their writes, but ``bash`` does not, so the directory is indexed once
when capture starts: every captured file is stored (content-addressed, so an unchanged
file costs one hash on later starts) and listed in a *manifest*. From then on a turn's
state is that manifest plus an overlay of the files that differ from it, and what a turn
re-examines is only what changed: the paths edit tools announced and what the watcher
(inotify, or a stat scan after ``bash``) saw. Nothing here runs git.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from tilth.timeline.record.blob_store import (
    BlobStore,
    Entry,
    max_file_bytes,
    read_state_in,
    store_state,
)
from tilth.timeline.record.dir_state import (
    Files,
    IgnoreRules,
    entry_of,
    store_manifest,
    walk_files,
)
from tilth.timeline.record.turn_changes import TurnChanges, ignored_gap
from tilth.timeline.record.worktree_paths import entry_kind, expand_dirs

Overlay = dict[str, Entry | None]


@dataclass
class DirTurn:
    """The captured state at one instant and what changed since the previous one."""

    head: str
    """``manifest:<blob>``: the directory as indexed when capture started."""
    overlay: Overlay
    files_changed: list[str]
    gaps: list[str]


class DirCapture:
    """Turn capture for a directory that may or may not be a git repository (never asked)."""

    def __init__(
        self, root: Path, store: BlobStore, *, cap: int | None = None, watch: bool = True
    ) -> None:
        self.root = root.resolve()
        self.store = store
        self.cap = max_file_bytes() if cap is None else cap
        self.rules = IgnoreRules.for_root(self.root)
        self.head = ""
        self.manifest: Files = {}
        self.overlay: Overlay = {}
        self.start_gaps: list[str] = []
        """What the initial index could not store (files over the size cap)."""
        self.indexed_files = 0
        self._watch = watch
        self.changes = TurnChanges(
            self.root, ignored_dir=self.rules.ignored_dir, skip_dirs=self._skipped
        )
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._lock = threading.Lock()

    # ---- set-up -----------------------------------------------------------------------------
    def start(self, *, background: bool = False) -> DirCapture:
        """Index the directory (in a thread with ``background``; every hook waits for it)."""
        if background:
            self._thread = threading.Thread(target=self._index_safely, name="tilth-index")
            self._thread.daemon = True
            self._thread.start()
        else:
            self._index()
        return self

    def _index_safely(self) -> None:
        try:
            self._index()
        except BaseException as exc:  # a thread's boundary: re-raised by wait_ready
            self._failure = exc

    def _index(self) -> None:
        files, skipped = walk_files(self.root, self.rules)
        if self._watch:
            # Watch before reading contents, so a change during the read is seen.
            self.changes.watch(set(skipped))
        manifest: Files = {}
        gaps: list[str] = []
        dirs: dict[str, bool] = {}
        for rel in files:
            try:
                state = read_state_in(self.root, rel, dirs, self.cap)
            except OSError as exc:
                gaps.append(f"unreadable, not captured: {rel} ({exc.strerror or exc})")
                continue
            if state is None:
                continue
            stored = store_state(self.store, rel, state, self.cap)
            if stored.entry is None:
                gaps.append(stored.gap or f"not captured: {rel}")
                continue
            manifest[rel] = stored.entry
        self.head = store_manifest(self.store, manifest)
        self.manifest = manifest
        self.overlay = {}
        self.start_gaps = gaps
        self.indexed_files = len(manifest)
        self.store.sync()

    def wait_ready(self) -> None:
        """Block until the initial index is done; re-raise what stopped it."""
        thread = self._thread
        if thread is not None:
            thread.join()
            self._thread = None
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure
        if not self.head:
            self._index()

    @property
    def watcher_kind(self) -> str:
        """``inotify``, ``scan`` or ``none``."""
        return self.changes.watcher_kind

    def close(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.changes.close()

    # ---- the ToolObserver seam ----------------------------------------------------------------
    def before_write(self, path: Path) -> None:
        """An edit tool is about to write ``path``: its state before is already recorded."""
        self.wait_ready()
        self.changes.wrote(path)

    def before_bash(self, command: str) -> None:
        self.wait_ready()
        self.changes.drain()

    def after_bash(self, command: str) -> None:
        self.changes.ran(command)
        self.changes.drain(after_bash=True)

    # ---- turn boundaries ----------------------------------------------------------------------
    def finish_turn(self) -> DirTurn:
        """The state now (manifest + overlay), the files changed since the last call, gaps."""
        self.wait_ready()
        with self._lock:
            changes = self.changes
            changes.drain()
            candidates = changes.candidates()
            if changes.full_scan or not self._watch:
                files, _ = walk_files(self.root, self.rules)
                candidates |= set(files) | set(self.manifest) | set(self.overlay)
            turn = self._evaluate(candidates)
            turn.gaps += changes.clear()
            return turn

    def full_state(self) -> Files:
        """Every captured file now, ``path → entry`` (manifest with the overlay applied)."""
        files = dict(self.manifest)
        for rel, entry in self.overlay.items():
            if entry is None:
                files.pop(rel, None)
            else:
                files[rel] = entry
        return files

    # ---- internals ------------------------------------------------------------------------------
    def _skipped(self) -> set[str]:
        _, skipped = walk_files(self.root, self.rules)
        return skipped

    def _expand(self, candidates: set[str]) -> set[str]:
        """Directories stand for the files below them (created, moved or deleted trees)."""
        rules = self.rules
        return expand_dirs(
            self.root,
            candidates,
            (self.manifest, self.overlay),
            lambda rel: rules.ignored(rel) or rules.ignored_dir(rel),
        )

    def _evaluate(self, candidates: set[str]) -> DirTurn:
        candidates = self._expand(candidates)
        overlay: Overlay = {}
        changed: list[str] = []
        gaps: list[str] = []
        ignored_hits: list[str] = []
        dirs: dict[str, bool] = {}
        for rel, entry in self.overlay.items():
            if rel in candidates:
                continue
            if entry is None or self.store.has(entry):
                overlay[rel] = entry
            else:
                candidates.add(rel)  # its blob was collected meanwhile: store it again
        for rel in sorted(candidates):
            if self.rules.ignored(rel):
                if entry_kind(self.root, rel) is not None:
                    ignored_hits.append(rel)
                continue
            try:
                state = read_state_in(self.root, rel, dirs, self.cap)
            except OSError as exc:
                gaps.append(f"unreadable, not captured: {rel} ({exc.strerror or exc})")
                if rel in self.overlay:
                    overlay[rel] = self.overlay[rel]
                continue
            now = entry_of(state) if state is not None else None
            before = self.overlay[rel] if rel in self.overlay else self.manifest.get(rel)
            if now != before:
                changed.append(rel)
            if now == self.manifest.get(rel):
                continue
            if state is None:
                overlay[rel] = None
                continue
            if now == before and before is not None and self.store.has(before):
                overlay[rel] = before
                continue
            stored = store_state(self.store, rel, state, self.cap)
            if stored.entry is None:
                gaps.append(stored.gap or f"not captured: {rel}")
                continue
            overlay[rel] = stored.entry
        if ignored_hits:
            gaps.append(ignored_gap(ignored_hits))
        self.store.sync()
        self.overlay = overlay
        return DirTurn(self.head, dict(overlay), changed, gaps)
