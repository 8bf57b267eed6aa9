"""Harness state: read it cheaply for a checkpoint (a ``HarnessState``).

The state a checkpoint fixes is ``prd.json``, every ``tasks/<T>.json``, the line
count of every ledger and of ``progress.txt``, ``tokens_used`` and the session
status. Reads look only at file tails where a file can grow without bound (the
event log, threads), so recording a checkpoint costs the same at turn 5 and at
turn 5,000. Putting it back is ``tilth.timeline.rewind.state_restore``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from tilth.errors import SessionCorrupt
from tilth.session.files import read_json
from tilth.session.harness_state import HarnessState
from tilth.session.records import read_task_state
from tilth.session.store import Session
from tilth.session.threads import Thread

_TAIL_WINDOW = 64 * 1024


# ---- cheap reads ----------------------------------------------------------------------------
def _last_complete_line(path: Path, end: int | None = None) -> tuple[bytes | None, int]:
    """The last newline-terminated line of ``path`` (of its first ``end`` bytes) and the
    file size (tail read only)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None, 0
    if end is not None:
        size = min(size, end)
    if size == 0:
        return None, 0
    window = _TAIL_WINDOW
    with open(path, "rb") as handle:
        while True:
            start = max(0, size - window)
            handle.seek(start)
            chunk = handle.read(size - start)
            end = chunk.rfind(b"\n")
            if end < 0:
                return None, size
            begin = chunk.rfind(b"\n", 0, end) + 1
            if begin > 0 or start == 0:
                return chunk[begin:end], size
            window *= 4


def log_tail(path: Path, end: int | None = None) -> tuple[int, int]:
    """``(size in bytes, seq of the last complete event)`` of an event log (of its first
    ``end`` bytes: the log as a cut there leaves it); 0s when empty."""
    line, size = _last_complete_line(path, end)
    if not line:
        return size, 0
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return size, 0
    seq = record.get("seq") if isinstance(record, dict) else None
    return size, seq if isinstance(seq, int) else 0


def last_event(path: Path) -> dict[str, Any] | None:
    """The last complete event record of a log, or None (tail read only)."""
    line, _ = _last_complete_line(path)
    if not line:
        return None
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return record if isinstance(record, dict) else None


def thread_heads(directory: Path) -> dict[str, str | None]:
    """``key → last message id`` of every thread, reading only each file's tail."""
    heads: dict[str, str | None] = {}
    if not directory.is_dir():
        return heads
    for path in sorted(directory.glob("*.jsonl")):
        line, _ = _last_complete_line(path)
        head: str | None = None
        if line:
            try:
                record = json.loads(line)
                head = str(record["id"]) if isinstance(record, dict) and "id" in record else None
            except (json.JSONDecodeError, UnicodeDecodeError):
                head = Thread(directory, path.stem).last_id()
        heads[path.stem] = head
    return heads


def count_lines(path: Path) -> int:
    """Complete lines in ``path`` (0 when missing); a torn last line does not count."""
    try:
        with open(path, "rb") as handle:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    except FileNotFoundError:
        return 0


def _read_optional_json(path: Path, what: str) -> Any:
    try:
        return read_json(path, what=what)
    except FileNotFoundError:
        return None


_Stamp = tuple[int, int, int, int]
_task_reads: dict[Path, dict[str, tuple[_Stamp, Any]]] = {}
"""``tasks dir → file name → (stat, state as stored)``: what the last capture read."""
_SETTLED_NS = 2_000_000_000
"""A file whose mtime is this much older than now is trusted by its stat: a rewrite within
the same clock tick, same size, on a recycled inode could otherwise pass for it (git's
"racy clean" problem); younger ones are read again."""


def _task_states(tasks_dir: Path) -> dict[str, Any]:
    """Every ``tasks/<T>.json`` as stored; a file whose stat is unchanged since the last
    capture (and settled) is not read again: a run of many tasks changes one at a time."""
    known = _task_reads.get(tasks_dir, {})
    seen: dict[str, tuple[_Stamp, Any]] = {}
    tasks: dict[str, Any] = {}
    now = time.time_ns()
    try:
        entries = sorted(os.scandir(tasks_dir), key=lambda e: e.name)
    except FileNotFoundError:
        _task_reads.pop(tasks_dir, None)
        return tasks
    for entry in entries:
        if not entry.name.endswith(".json"):
            continue
        path = Path(entry.path)
        try:
            info = entry.stat()
        except FileNotFoundError:
            continue
        stamp = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        hit = known.get(entry.name)
        if hit is not None and hit[0] == stamp:
            value = hit[1]
        else:
            value = read_task_state(path, path.stem, as_stored=True)
        tasks[path.stem] = value
        if now - info.st_mtime_ns > _SETTLED_NS:
            seen[entry.name] = (stamp, value)
    _task_reads[tasks_dir] = seen
    return tasks


def read_harness_state(session: Session) -> HarnessState:
    """The harness state as it is on disk now (a pure read)."""
    cp = session.record()
    tasks = _task_states(session.tasks_dir)
    ledger_dir = session.ledger.directory
    ledger = {}
    if ledger_dir.is_dir():
        ledger = {p.stem: count_lines(p) for p in sorted(ledger_dir.glob("*.jsonl"))}
    return HarnessState.from_dict(
        {
            "prd": _read_optional_json(session.prd_path, "prd.json"),
            "tasks": tasks,
            "ledger": ledger,
            "progress_lines": count_lines(session.progress_path),
            "tokens_used": cp.tokens_used,
            "status": cp.status,
        }
    )


def capture_state(session: Session) -> dict[str, Any]:
    """The harness state as it is on disk now, as a checkpoint stores it."""
    return read_harness_state(session).to_dict()


def worktree_of(session: Session) -> Path:
    """The session's worktree: ``checkpoint.json`` ``workspace``, else ``<dir>/workspace``."""
    try:
        raw = session.record().workspace
    except SessionCorrupt:
        raw = None
    return Path(str(raw)) if raw else session.workspace_dir
