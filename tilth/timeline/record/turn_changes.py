"""Which paths a turn may have changed: the bookkeeping both turn captures share.

At a turn's end a capture re-examines only what may have changed: the paths edit tools
announced (``before_write``), what the watcher saw (inotify as it happens, a stat scan
after ``bash``), and everything when the watcher lost events or there is none (a full
comparison). ``TurnChanges`` keeps that account for one worktree from one turn's end to
the next; what a path holds is the capture's business (``turn_capture`` against a git
commit, ``dir_capture`` against a manifest).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from pathlib import Path

from tilth.timeline.record.change_feed import (
    IgnoredDir,
    InotifyWatcher,
    StatScanner,
    Watcher,
    WatchUnavailable,
    start_watcher,
)
from tilth.timeline.record.worktree_paths import relative_path

BASH_GAP = (
    "bash may have had effects outside files (processes, network, paths outside the workspace)"
)
MAX_LISTED_GAPS = 20


class TurnChanges:
    """The candidates of the turn under way in ``root``, and the watcher that feeds them.

    ``keep`` says which paths count at all (the git capture leaves out ``.git``).
    ``ignored_dir`` and ``skip_dirs`` are bound methods, held through weak references so
    that no cycle keeps a dropped capture and its inotify instance alive: the kernel
    allows one user only a few (128 by default).
    """

    def __init__(
        self,
        root: Path,
        *,
        ignored_dir: IgnoredDir,
        skip_dirs: Callable[[], set[str]],
        keep: Callable[[str], bool] | None = None,
    ) -> None:
        self.root = root
        self.keep = keep
        self.touched: set[str] = set()
        """Paths edit tools announced."""
        self.seen: set[str] = set()
        """Paths the watcher reported."""
        self.commands: list[str] = []
        """The bash commands run."""
        self.full_scan = False
        """Only a full comparison can tell this turn's changes (events were lost, or bash
        ran with nothing watching)."""
        self.watcher: Watcher | None = None
        self._is_ignored_dir = _weakly(ignored_dir)
        self._skip_dirs = weakref.WeakMethod(skip_dirs)

    def watch(self, skip: set[str] | None = None) -> None:
        """Start the fastest watcher there is for ``root`` (inotify, else a stat scanner),
        leaving out ``skip`` (by default what ``skip_dirs`` says)."""
        skip = self._skipped() if skip is None else skip
        self.watcher = start_watcher(self.root, skip, self._is_ignored_dir)

    def wrote(self, path: Path) -> None:
        """An edit tool is about to write ``path`` (taken at the path a link leads to)."""
        rel = relative_path(self.root, path)
        if rel is not None and (self.keep is None or self.keep(rel)):
            self.touched.add(rel)

    def ran(self, command: str) -> None:
        """``bash`` ran ``command``: what it changed comes from the watcher."""
        self.commands.append(command)

    def drain(self, *, after_bash: bool = False) -> None:
        """Take what the watcher saw; a stat scan runs only ``after_bash``."""
        watcher = self.watcher
        if watcher is None:
            if after_bash:
                self.full_scan = True
            return
        if isinstance(watcher, StatScanner) and not after_bash:
            return  # a stat scan costs a walk: pay it only where bash may have written
        try:
            found = watcher.changed()
        except WatchUnavailable:
            # Events were lost: this turn falls back to a full comparison, and from now on
            # the stat scanner is used.
            watcher.close()
            self.watcher = StatScanner(self.root, self._skipped(), self._is_ignored_dir)
            self.full_scan = True
            return
        self.seen |= found if self.keep is None else {p for p in found if self.keep(p)}

    def candidates(self) -> set[str]:
        """Every path announced or reported since the last ``clear``."""
        return self.touched | self.seen

    @property
    def live(self) -> bool:
        """True while the kernel's change feed has reported every change this turn."""
        return isinstance(self.watcher, InotifyWatcher) and not self.full_scan

    def clear(self) -> list[str]:
        """Start the next turn; returns the gaps of the one that ended (bash's)."""
        gaps = [BASH_GAP] if self.commands else []
        self.touched.clear()
        self.seen.clear()
        self.commands.clear()
        self.full_scan = False
        return gaps

    @property
    def watcher_kind(self) -> str:
        """``inotify``, ``scan`` or ``none`` (not set up yet, or watching turned off)."""
        if isinstance(self.watcher, InotifyWatcher):
            return "inotify"
        return "scan" if isinstance(self.watcher, StatScanner) else "none"

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None

    def _skipped(self) -> set[str]:
        skip_dirs = self._skip_dirs()
        return set() if skip_dirs is None else skip_dirs()


def _weakly(method: IgnoredDir) -> IgnoredDir:
    """``method`` through a weak reference (False once its object is gone)."""
    ref = weakref.WeakMethod(method)

    def ask(rel: str) -> bool:
        bound = ref()
        return bool(bound is not None and bound(rel))

    return ask


def ignored_gap(paths: list[str]) -> str:
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
