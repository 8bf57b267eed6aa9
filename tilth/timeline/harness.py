"""Harness state: read it cheaply for a checkpoint, and put it back for a rewind.

The state a checkpoint fixes is ``prd.json``, every ``tasks/<T>.json``, the line
count of every ledger and of ``progress.txt``, ``tokens_used`` and the session
status. Reads look only at file tails where a file can grow without bound (the
event log, threads), so recording a checkpoint costs the same at turn 5 and at
turn 5,000. Every restore function is idempotent: it writes absolute values.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tilth.errors import SessionCorrupt
from tilth.session.files import atomic_write_bytes, atomic_write_json, read_json
from tilth.session.store import Session
from tilth.session.threads import Thread, message_number

_TAIL_WINDOW = 64 * 1024


# ---- cheap reads ----------------------------------------------------------------------------
def _last_complete_line(path: Path) -> tuple[bytes | None, int]:
    """The last newline-terminated line of ``path`` and the file size (tail read only)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None, 0
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


def log_tail(path: Path) -> tuple[int, int]:
    """``(size in bytes, seq of the last complete event)`` of an event log; 0s when empty."""
    line, size = _last_complete_line(path)
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


def capture_state(session: Session) -> dict[str, Any]:
    """The harness state as it is on disk now (a pure read)."""
    cp = session.checkpoint()
    tasks: dict[str, Any] = {}
    if session.tasks_dir.is_dir():
        for path in sorted(session.tasks_dir.glob("*.json")):
            tasks[path.stem] = _read_optional_json(path, f"tasks/{path.name}")
    ledger_dir = session.ledger.directory
    ledger = {}
    if ledger_dir.is_dir():
        ledger = {p.stem: count_lines(p) for p in sorted(ledger_dir.glob("*.jsonl"))}
    return {
        "prd": _read_optional_json(session.prd_path, "prd.json"),
        "tasks": tasks,
        "ledger": ledger,
        "progress_lines": count_lines(session.progress_path),
        "tokens_used": int(cp.get("tokens_used") or 0),
        "status": str(cp.get("status", "running")),
    }


def task_statuses(prd: Any) -> dict[str, str]:
    """``task id → status`` from a prd list (tolerant of junk entries)."""
    if not isinstance(prd, list):
        return {}
    return {
        str(t["id"]): str(t.get("status") or "pending")
        for t in prd
        if isinstance(t, dict) and "id" in t
    }


def worktree_of(session: Session) -> Path:
    """The session's worktree: ``checkpoint.json`` ``workspace``, else ``<dir>/workspace``."""
    try:
        raw = session.checkpoint().get("workspace")
    except SessionCorrupt:
        raw = None
    return Path(str(raw)) if raw else session.workspace_dir


# ---- idempotent restores ----------------------------------------------------------------------
def restore_files(session: Session, state: dict[str, Any]) -> None:
    """Write prd.json, tasks/*.json and the status/token fields of checkpoint.json."""
    if state.get("prd") is not None:
        atomic_write_json(session.prd_path, state["prd"])
    recorded: dict[str, Any] = state.get("tasks") or {}
    if session.tasks_dir.is_dir():
        for path in session.tasks_dir.glob("*.json"):
            if path.stem not in recorded:
                path.unlink(missing_ok=True)
    for task_id, content in recorded.items():
        if content is not None:
            atomic_write_json(session.tasks_dir / f"{task_id}.json", content)
    fields: dict[str, Any] = {}
    if "status" in state:
        fields["status"] = state["status"]
    if "tokens_used" in state:
        fields["tokens_used"] = state["tokens_used"]
    if fields:
        session.update_checkpoint(**fields)


def cut_lines(path: Path, keep: int) -> int:
    """Keep the first ``keep`` lines of ``path`` (0 deletes it); returns lines dropped."""
    if keep <= 0:
        had = count_lines(path)
        path.unlink(missing_ok=True)
        return had
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    lines = data.splitlines(keepends=True)
    if len(lines) <= keep and data.endswith(b"\n"):
        return 0
    atomic_write_bytes(path, b"".join(lines[:keep]))
    return max(0, len(lines) - keep)


def restore_counts(directory: Path, counts: dict[str, int], suffix: str = ".jsonl") -> None:
    """Cut each file in ``directory`` to its recorded line count; delete unrecorded ones."""
    if not directory.is_dir():
        return
    for path in directory.glob(f"*{suffix}"):
        cut_lines(path, int(counts.get(path.stem, 0)))


def truncate_thread(directory: Path, key: str, head: str | None) -> int:
    """Keep a thread's messages up to ``head`` (by message number); returns how many dropped.

    Numbers are monotonic within a thread, so a head that was since rewritten away
    (a summary) still cuts at the right place.
    """
    thread = Thread(directory, key)
    stored = thread.read()
    # Summaries (tilth.timeline.summarize): rebuild the thread as it was at ``head``, also
    # when a summary replaced ``head`` or was placed before it ("up-to").
    from tilth.timeline.summarize import cut_at

    keep = cut_at(stored, head)
    if keep is None:
        limit = message_number(head) if head else 0
        keep = [m for m in stored if message_number(m.id) <= limit]
    if [m.id for m in keep] != [m.id for m in stored]:
        thread.rewrite(keep)
    return max(0, len(stored) - len(keep))


def restore_threads(directory: Path, heads: dict[str, str | None]) -> None:
    """Truncate recorded threads to their heads; delete threads created after the record."""
    if not directory.is_dir():
        return
    for path in sorted(directory.glob("*.jsonl")):
        key = path.stem
        if key in heads:
            truncate_thread(directory, key, heads[key])
        else:
            # rewrite([]) first so the thread's id floor survives: ids are never reused.
            Thread(directory, key).rewrite([])
            path.unlink(missing_ok=True)


def remove_path(path: Path) -> None:
    """Delete a file or a directory tree; absent is fine."""
    import shutil

    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def truncate_log(path: Path, offset: int) -> bool:
    """Cut an append-only log to ``offset`` bytes when it is longer; True if it was cut."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return False
    if size <= offset:
        return False
    with open(path, "r+b") as handle:
        handle.truncate(offset)
        handle.flush()
        os.fsync(handle.fileno())
    return True
