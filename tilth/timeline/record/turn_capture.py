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

import json
import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    remember_store,
    store_state,
)
from tilth.timeline.record.change_feed import (
    InotifyWatcher,
    StatScanner,
    Watcher,
    WatchUnavailable,
    start_watcher,
)
from tilth.timeline.record.git_reads import GitId, IgnoreChecker, TreeCache, ignored_dirs, read_head
from tilth.timeline.record.worktree_paths import entry_kind, expand_dirs, relative_path

STATE_FILE = "capture-state.json"
"""The last turn's end state (overlay, git ids, oversize files), for the next process."""
BASH_GAP = (
    "bash may have had effects outside files (processes, network, paths outside the workspace)"
)
MAX_LISTED_GAPS = 20


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


@dataclass
class _Baseline:
    """The captured state at the end of the previous turn (or at start)."""

    head: str
    overlay: dict[str, Entry | None] = field(default_factory=dict)
    ids: dict[str, GitId | None] = field(default_factory=dict)
    """Git ids of the overlay's paths, so states compare without reading blobs back."""
    oversize: dict[str, GitId] = field(default_factory=dict)
    """Files over the size cap (not stored) and their git ids when last reported."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "head": self.head,
            "overlay": self.overlay,
            "ids": {k: list(v) if v else None for k, v in self.ids.items()},
            "oversize": {k: list(v) for k, v in self.oversize.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> _Baseline:
        def pair(value: Any) -> GitId | None:
            return (str(value[0]), str(value[1])) if isinstance(value, list) else None

        oversize = {k: pair(v) for k, v in (data.get("oversize") or {}).items()}
        return cls(
            str(data.get("head") or ""),
            dict(data.get("overlay") or {}),
            {k: pair(v) for k, v in (data.get("ids") or {}).items()},
            {k: v for k, v in oversize.items() if v is not None},
        )


def _git_id(state: FileState) -> GitId:
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
        self._watcher: Watcher | None = None
        self._ignore: IgnoreChecker | None = None
        self._touched: set[str] = set()
        self._seen: set[str] = set()
        self._bash: list[str] = []
        self._full_scan = False
        self._ready = False
        self._auto_gc = False
        self.baseline = _Baseline("")

    @classmethod
    def for_session(cls, session: Session, worktree: Path) -> TurnCapture:
        """A capture for ``session`` storing into ``$TILTH_HOME/snapshots`` (set up lazily)."""
        from tilth.config import load_settings

        capture = cls(session, worktree, BlobStore.for_home(load_settings().home))
        capture._auto_gc = True
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
        rel = self._relative(path)
        if rel is not None:
            self._touched.add(rel)

    def before_bash(self, command: str) -> None:
        """Drain what changed so far, so the command's own changes are told apart."""
        try:
            if self._ensure() is None:
                self._drain()
        except (GitError, OSError):
            self._ready = False

    def after_bash(self, command: str) -> None:
        """Collect every path the command created, modified or deleted inside the worktree."""
        self._bash.append(command)
        try:
            self._ensure()
            self._drain(after_bash=True)
        except (GitError, OSError):
            self._ready = False

    # ---- turn boundaries ----------------------------------------------------------------
    def finish_turn(self) -> TurnResult:
        """The turn's overlay, changed files and coverage gaps; starts the next turn.

        A capture problem never stops the run: the turn is recorded without files and
        says why, and the next turn starts from a full comparison with HEAD.
        """
        had_bash = bool(self._bash)
        try:
            return self._finish()
        except (GitError, OSError) as exc:
            self._ready = False
            self._touched.clear()
            self._seen.clear()
            self._bash.clear()
            gaps = [f"turn snapshot failed, files of this turn not captured: {exc}"]
            return TurnResult({}, [], [*gaps, BASH_GAP] if had_bash else gaps, head="")

    def _finish(self) -> TurnResult:
        had_bash = bool(self._bash)
        first = self._ensure()
        if first is not None:
            # Nothing was observed before: the full comparison is the answer.
            if had_bash:
                first.gaps.append(BASH_GAP)
            return first
        self._drain()
        head = read_head(self.root)
        base = self.baseline
        candidates = self._touched | self._seen
        carried: set[str] = set()
        if isinstance(self._watcher, InotifyWatcher) and head == base.head:
            # The kernel reported every change, so overlay files it did not mention are as
            # they were: carry their entries over without reading them again.
            carried = set(base.overlay) - candidates
        else:
            candidates |= set(base.overlay)
        if head != base.head:
            candidates |= self._paths_between(base.head, head)
        if self._full_scan:
            candidates |= self._status_paths()
            carried -= candidates
        result = self._evaluate(head, candidates, carried)
        fault_point("capture")  # tests: killed after storing, before the checkpoint is written
        if self._bash:
            result.gaps.append(BASH_GAP)
        self._touched.clear()
        self._seen.clear()
        self._bash.clear()
        self._full_scan = False
        return result

    def resync(self) -> TurnResult:
        """Recompute the state from scratch (at start, and after a restore changed the tree)."""
        if not self._ready:
            self._ready = True
            self.skip = ignored_dirs(self.root)
            self._first_use()
        self._drain()
        self._touched.clear()
        self._seen.clear()
        self._bash.clear()
        head = read_head(self.root)
        # Compared with the last turn recorded (by this or an earlier process), so a first
        # turn reports what changed since, not every file that differs from HEAD.
        self.baseline = self._saved_baseline(head)
        result = self._evaluate(head, self._status_paths() | set(self.baseline.overlay))
        self._full_scan = False
        if self._watch and self._watcher is None:
            self._watcher = start_watcher(self.root, self.skip, self._weak_is_ignored_dir())
        _LIVE[self.root] = self
        return result

    def changed_since_turn(self) -> set[str] | None:
        """Every path that may have changed since the last turn ended (or the last resync),
        when the kernel's change feed is live; None when only a walk could tell."""
        if not self._ready or not isinstance(self._watcher, InotifyWatcher) or self._full_scan:
            return None
        self._drain()
        if self._full_scan or not isinstance(self._watcher, InotifyWatcher):
            return None
        return self._touched | self._seen

    @property
    def watcher_kind(self) -> str:
        """``inotify``, ``scan`` or ``none`` (not set up yet, or watching turned off)."""
        if isinstance(self._watcher, InotifyWatcher):
            return "inotify"
        return "scan" if isinstance(self._watcher, StatScanner) else "none"

    def close(self) -> None:
        """Release the watcher's and the ignore checker's resources."""
        if _LIVE.get(self.root) is self:
            del _LIVE[self.root]
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None
        if self._ignore is not None:
            self._ignore.close()
            self._ignore = None

    # ---- internals --------------------------------------------------------------------------
    def _first_use(self) -> None:
        """Tell retention where this session lives; start a due collection in the background."""
        if self.session is not None:
            gc.register_root(self.store, self.session.dir.parent)
            remember_store(self.session, self.store)
        if self._auto_gc:
            from tilth.config import load_settings

            gc.collect_in_background(load_settings())

    def _relative(self, path: Path) -> str | None:
        rel = relative_path(self.root, path)
        return rel if rel is not None and _rel_ok(rel) else None

    def _drain(self, *, after_bash: bool = False) -> None:
        watcher = self._watcher
        if watcher is None:
            if after_bash:
                self._full_scan = True
            return
        if isinstance(watcher, StatScanner) and not after_bash:
            return  # a stat scan costs a walk: only pay it where bash may have written
        try:
            self._seen |= {p for p in watcher.changed() if _rel_ok(p)}
        except WatchUnavailable:
            # Events were lost: this turn falls back to a full comparison, and from now on
            # the stat scanner is used.
            watcher.close()
            self._watcher = StatScanner(self.root, self.skip, self._weak_is_ignored_dir())
            self._full_scan = True

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

    def _weak_is_ignored_dir(self) -> Callable[[str], bool]:
        """``_is_ignored_dir`` through a weak reference."""
        # No cycle capture → watcher → capture: a dropped capture then frees its inotify
        # instance at once, and the kernel allows one user only a few (128 by default).
        method = weakref.WeakMethod(self._is_ignored_dir)

        def ask(rel: str) -> bool:
            bound = method()
            return bool(bound is not None and bound(rel))

        return ask

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
            state = read_state_in(self.root, rel, dirs)
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
            gaps.append(_ignored_gap(ignored_hits))
        self.store.sync()
        self.baseline = _Baseline(head, overlay, ids, oversize)
        self._save_baseline()
        return TurnResult(overlay, changed, gaps, head, stored)

    # ---- the baseline across processes ------------------------------------------------------
    def _baseline_path(self) -> Path | None:
        return None if self.session is None else self.session.dir / "timeline" / STATE_FILE

    def _save_baseline(self) -> None:
        """Keep the turn's end state for the next process (no fsync: losing it only makes
        that process's first turn report more)."""
        path = self._baseline_path()
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(json.dumps(self.baseline.to_dict()), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass

    def _saved_baseline(self, head: str) -> _Baseline:
        """The previous process's last turn, when it ended on ``head``; else an empty one."""
        path = self._baseline_path()
        if path is not None:
            try:
                saved = _Baseline.from_dict(json.loads(path.read_text("utf-8")))
            except (OSError, ValueError, AttributeError):
                saved = None
            if saved is not None and saved.head == head:
                return saved
        return _Baseline(head)


def _ignored_gap(paths: list[str]) -> str:
    """One gap line; files under an ignored directory are counted, not listed one by one."""
    groups: dict[str, int] = {}
    for rel in paths:
        top, sep, _ = rel.partition("/")
        key = f"{top}/" if sep else rel
        groups[key] = groups.get(key, 0) + 1
    items = [f"{key} ({n} paths)" if n > 1 else key for key, n in groups.items()]
    more = len(items) - MAX_LISTED_GAPS
    listed = ", ".join(items[:MAX_LISTED_GAPS]) + (f" (and {more} more)" if more > 0 else "")
    return f"ignored path changed, not captured: {listed}"


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):
        return False
