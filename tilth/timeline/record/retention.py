"""Retention for turn snapshots: prune old turn checkpoints, then sweep unreferenced blobs.

Two budgets (``TILTH_CHECKPOINT_MAX_AGE_DAYS``, default 30; ``TILTH_CHECKPOINT_MAX_BYTES``,
default 1 GiB). Turn checkpoints older than the age budget go first; then, oldest first
across every session, more turn checkpoints until the blobs still referenced fit the size
budget. Seed, task-start and stage checkpoints are never pruned (their code lives in git),
nor is the newest checkpoint of a session (it is what conflict detection compares with).

The sweep is mark-and-sweep over every session that ever stored into the shared store
(``snapshots/roots`` lists their sessions directories): a blob is kept when any
checkpoint, an in-flight rewind journal or a recorded restore names it, or when it is
younger than the grace period (a turn may be storing it right now).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tilth.config import Settings
from tilth.session.store import Session, is_session_id
from tilth.timeline.record.blob_store import BlobStore, split_entry
from tilth.timeline.record.checkpoints import Checkpoint, checkpoint_path, read_timeline
from tilth.timeline.record.dir_state import is_manifest_head, manifest_blobs
from tilth.timeline.record.stored_state import file_blobs

GRACE_SECONDS = 3600
AUTO_INTERVAL_SECONDS = 24 * 3600


@dataclass
class GcReport:
    """What one collection did (or, with ``dry_run``, would do)."""

    checkpoints_pruned: list[str] = field(default_factory=list)
    """``<session>/<checkpoint id>`` of every turn checkpoint removed."""
    blobs_removed: int = 0
    bytes_freed: int = 0
    blobs_kept: int = 0
    bytes_kept: int = 0

    def render(self) -> str:
        return (
            f"pruned {len(self.checkpoints_pruned)} turn checkpoint(s); removed "
            f"{self.blobs_removed} blob(s), {self.bytes_freed} bytes freed; "
            f"{self.blobs_kept} blob(s), {self.bytes_kept} bytes kept"
        )


def _roots(store: BlobStore, extra: list[Path]) -> list[Path]:
    try:
        listed = [Path(x) for x in (store.root / "roots").read_text("utf-8").splitlines() if x]
    except FileNotFoundError:
        listed = []
    seen: dict[str, Path] = {}
    for root in [*extra, *listed]:
        seen.setdefault(str(root.resolve()), root)
    return [p for p in seen.values() if p.is_dir()]


def _sessions(roots: list[Path]) -> list[Session]:
    found = []
    for root in roots:
        for child in sorted(root.iterdir()):
            if child.is_dir() and is_session_id(child.name):
                found.append(Session(child.name, child))
    return found


def _blobs_in(value: Any, out: set[str]) -> None:
    """Every blob id named in an overlay-like structure (journals nest them in plans)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("overlay", "keep") and isinstance(item, dict):
                out.update(split_entry(e)[0] for e in item.values() if isinstance(e, str))
            else:
                _blobs_in(item, out)
    elif isinstance(value, list):
        for item in value:
            _blobs_in(item, out)


def _side_references(session: Session, store: BlobStore) -> set[str]:
    """Blobs named by an in-flight journal, the recorded restore state, or a checkpoint kept
    in an undo archive (it comes back when the go-back is undone)."""
    out: set[str] = set()
    timeline = session.dir / "timeline"
    names = [timeline / "journal.json", timeline / "code-state.json"]
    names += sorted(timeline.glob("undo/cp-*/checkpoints/cp-*.json"))
    for path in names:
        try:
            value = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        _blobs_in(value, out)
        out |= file_blobs(value)  # an archived checkpoint's prd and task states
        head = value.get("head") if isinstance(value, dict) else None
        if is_manifest_head(head):
            out |= manifest_blobs(store, str(head))
    return out


def _refs(checkpoint: Checkpoint, store: BlobStore) -> set[str]:
    found = {split_entry(e)[0] for e in checkpoint.overlay.values() if e}
    found |= checkpoint.state_blobs()  # the prd and task states it names
    if is_manifest_head(checkpoint.head):
        # A session without git (chat): the manifest and every file it lists.
        found |= manifest_blobs(store, checkpoint.head)
    return found


def _age_days(ts: str, now: datetime) -> float:
    try:
        when = datetime.strptime(ts.rstrip("Z")[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return 0.0
    return (now - when).total_seconds() / 86400


def collect(
    settings: Settings,
    *,
    now: datetime | None = None,
    grace_seconds: float = GRACE_SECONDS,
    dry_run: bool = False,
) -> GcReport:
    """Apply the retention budgets and sweep blobs no one references; returns what it did."""
    now = now or datetime.now(UTC)
    store = BlobStore.for_home(settings.home)
    report = GcReport()
    sessions = _sessions(_roots(store, [settings.sessions_dir]))
    # Unresolved: only the blob ids matter here, not the states they hold.
    timelines = {s.id: read_timeline(s, resolve=False).checkpoints for s in sessions}
    pinned: set[str] = set()
    for session in sessions:
        pinned |= _side_references(session, store)
    sizes = {blob: path.stat().st_size for blob, path in store.iter_blobs()}
    # Candidates for pruning: turn checkpoints that are not their session's newest.
    prunable: list[tuple[str, Session, Checkpoint]] = []
    refcount: dict[str, int] = {}
    by_id = {s.id: s for s in sessions}
    for sid, checkpoints in timelines.items():
        for index, cp in enumerate(checkpoints):
            for blob in _refs(cp, store):
                refcount[blob] = refcount.get(blob, 0) + 1
            if (cp.kind == "turn" or cp.is_before) and index < len(checkpoints) - 1:
                prunable.append((cp.ts, by_id[sid], cp))
    prunable.sort(key=lambda item: item[0])
    live = sum(sizes.get(b, 0) for b in refcount if refcount[b] > 0)
    doomed: list[tuple[Session, Checkpoint]] = []
    for _, session, cp in prunable:
        too_old = _age_days(cp.ts, now) > settings.checkpoint_max_age_days
        if not too_old and live <= settings.checkpoint_max_bytes:
            continue
        doomed.append((session, cp))
        for blob in _refs(cp, store):
            refcount[blob] -= 1
            if refcount[blob] == 0:
                live -= sizes.get(blob, 0)
    for session, cp in doomed:
        report.checkpoints_pruned.append(f"{session.id}/{cp.id}")
        if not dry_run:
            checkpoint_path(session, cp.seq).unlink(missing_ok=True)
            if cp.archive:
                # An undo point's archive goes with it.
                shutil.rmtree(session.dir / cp.archive, ignore_errors=True)
    keep = {b for b, n in refcount.items() if n > 0} | pinned
    cutoff = time.time() - grace_seconds
    for blob, path in store.iter_blobs():
        size = sizes.get(blob, 0)
        if blob in keep or _recent(path, cutoff):
            report.blobs_kept += 1
            report.bytes_kept += size
            continue
        report.blobs_removed += 1
        report.bytes_freed += size if dry_run else store.delete(blob)
    if not dry_run:
        _stamp(store)
    return report


def _recent(path: Path, cutoff: float) -> bool:
    try:
        return path.stat().st_mtime >= cutoff
    except FileNotFoundError:
        return True


def _stamp(store: BlobStore) -> None:
    store.root.mkdir(parents=True, exist_ok=True)
    (store.root / "last-gc").write_text(f"{time.time():.0f}\n")


def due(store: BlobStore, interval: float = AUTO_INTERVAL_SECONDS) -> bool:
    """True when no collection ran in the last ``interval`` seconds."""
    try:
        last = float((store.root / "last-gc").read_text().strip())
    except (OSError, ValueError):
        return True
    return time.time() - last >= interval


def collect_in_background(settings: Settings) -> threading.Thread | None:
    """Start a collection in a daemon thread when one is due (at most once a day).

    Interrupting it is harmless: each checkpoint file and blob is removed on its own.
    """
    store = BlobStore.for_home(settings.home)
    if not due(store) or os.environ.get("TILTH_CHECKPOINT_AUTO_GC", "").strip() == "0":
        return None
    _stamp(store)  # claim this interval first, so parallel sessions do not all collect
    thread = threading.Thread(target=_quiet_collect, args=(settings,), daemon=True)
    thread.start()
    return thread


def _quiet_collect(settings: Settings) -> None:
    try:
        collect(settings)
    except Exception:  # a background thread's boundary: a failed collection only waits a day
        pass
