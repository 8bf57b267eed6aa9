"""Harness state put back for a rewind: files, ledgers, threads and the event log.

Every function is idempotent: it writes absolute values (a recorded file, a line
count, a message id, a byte offset), so a step interrupted half-way can run again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tilth.session.files import atomic_write_bytes, atomic_write_json
from tilth.session.harness_state import HarnessState
from tilth.session.store import Session
from tilth.session.threads import Thread, message_number
from tilth.timeline.record.log_epoch import raise_epoch
from tilth.timeline.record.state_capture import count_lines
from tilth.timeline.rewind.summarize import cut_at


def restore_files(session: Session, recorded_state: Mapping[str, Any]) -> None:
    """Write prd.json, tasks/*.json and the status/token fields of checkpoint.json."""
    state = HarnessState.from_dict(recorded_state)
    stored = state.to_dict()
    if stored.get("prd") is not None:
        # As recorded (a damaged list too: the run's reader names it, as before).
        atomic_write_json(session.prd_path, stored["prd"])
    recorded: Mapping[str, Any] = state.tasks
    if "tasks" not in state.damaged and session.tasks_dir.is_dir():
        for path in session.tasks_dir.glob("*.json"):
            if path.stem not in recorded:
                path.unlink(missing_ok=True)
    for task_id, content in recorded.items():
        if content is not None:
            atomic_write_json(session.tasks_dir / f"{task_id}.json", content)
    fields: dict[str, Any] = {}
    if state.has("status"):
        fields["status"] = state.status
    if state.has("tokens_used"):
        fields["tokens_used"] = state.tokens_used
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
    # Summaries (tilth.timeline.rewind.summarize): rebuild the thread as it was at ``head``, also
    # when a summary replaced ``head`` or was placed before it ("up-to").
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


def cut_events(session: Session, offset: int, op: str) -> bool:
    """Cut ``events.jsonl`` to ``offset`` bytes, then count the cut (``record.log_epoch``)
    before anything is appended past it; True if the log was longer."""
    cut = truncate_log(session.events.path, offset)
    raise_epoch(session.dir, op)
    return cut


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
