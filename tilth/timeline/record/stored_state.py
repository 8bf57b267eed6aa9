"""A checkpoint's harness state as its file holds it: the prd and each task's state by blob id.

Every checkpoint fixes the prd and every ``tasks/<T>.json``; inlined, a file would grow with
the number of tasks, and a run's checkpoints with its square (a 35-task run wrote 22 MB of
them). So the file keeps, under ``state``, the blob id of ``prd`` and of each task's state
(their JSON, in the session's snapshot store, ``blob_store``), and names the keys so stored
in ``state_blobs``: ``["prd", "tasks"]``. A task that did not change costs one reference.
The ledger counts, progress lines, tokens and status stay inline (a few numbers).

This happens at the file boundary only: ``write_checkpoint`` stores, ``read_timeline``
resolves, and the ``Checkpoint`` in memory (and ``to_dict``, which journals embed) always
holds the state itself. A blob is made durable before a file that names it is written.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilth.session.store import Session
from tilth.timeline.record.blob_store import (
    BlobStore,
    SnapshotError,
    register_root,
    remember_store,
)

BLOBS_KEY = "state_blobs"
"""The file's key naming the ``state`` keys that hold blob ids."""
STORED_KEYS = ("prd", "tasks")
"""``prd``: one blob id for the whole value; ``tasks``: ``task id → blob id``."""
_CACHE_ENTRIES = 4096


@dataclass(frozen=True)
class StoredState:
    """How a checkpoint's state is on disk, kept with the checkpoint that was read or written,
    so writing it again (a fork's copy, a graft) costs no store access."""

    on_disk: dict[str, Any]
    keys: tuple[str, ...]
    root: Path
    """The store the blob ids are in."""
    state: dict[str, Any] | None
    """The state these refer to (None: not resolved); a write reuses ``on_disk`` only while
    the checkpoint still holds this very object."""

    def blobs(self) -> set[str]:
        """Every blob id the file names for its state."""
        return state_blobs(self.on_disk, self.keys)


def _encode(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def worth_storing(state: dict[str, Any]) -> bool:
    """True when ``state`` holds a prd or task states (what ``store_state`` stores)."""
    tasks = state.get("tasks")
    return state.get("prd") is not None or (isinstance(tasks, dict) and bool(tasks))


def store_state(session: Session, state: dict[str, Any], store: BlobStore) -> StoredState:
    """Put the prd and every task state of ``state`` into ``store``, durably; how the file
    holds it. A state with neither (a chat) stays inline and touches no store."""
    on_disk = dict(state)
    keys: list[str] = []
    if state.get("prd") is not None:
        on_disk["prd"] = _put(store, state["prd"])
        keys.append("prd")
    tasks = state.get("tasks")
    if isinstance(tasks, dict) and tasks:
        on_disk["tasks"] = {task: _put(store, value) for task, value in tasks.items()}
        keys.append("tasks")
    if keys:
        # Retention keeps only the blobs of sessions it knows of; and a blob must be on disk
        # before a file refers to it (fsynced: a power cut must not leave a dangling id).
        register_root(store, session.dir.parent)
        remember_store(session, store)
        store.sync(wait=True)
    return StoredState(on_disk, tuple(keys), store.root, state)


_cache_lock = threading.Lock()
"""Guards both caches below: the web server reads checkpoints from several threads, and an
entry evicted between another thread's lookup and its ``move_to_end`` raised ``KeyError``."""
_stored: OrderedDict[int, tuple[Any, Path, str, float]] = OrderedDict()
"""``id(value) → (value, store root, blob id, when stored)``: values stored lately. A
capture reads an unchanged task file as the very object it read before (``state_capture``),
so its blob id is known without encoding and hashing it again. The entry holds the value,
so its id cannot be reused while it is here."""
_FRESH_SECONDS = 600.0
"""How long a stored blob is trusted without freshening it: retention spares blobs younger
than an hour, so one stored this recently cannot be swept before the file naming it is."""


def _put(store: BlobStore, value: Any) -> str:
    """``store.put`` of ``value``'s JSON, skipped when this very object was stored lately."""
    now = time.monotonic()
    with _cache_lock:
        known = _stored.get(id(value))
    if known is not None and known[0] is value and known[1] == store.root:
        if now - known[3] < _FRESH_SECONDS:
            return known[2]
    blob = store.put(_encode(value))
    with _cache_lock:
        _stored[id(value)] = (value, store.root, blob, now)
        _stored.move_to_end(id(value))
        if len(_stored) > _CACHE_ENTRIES:
            _stored.popitem(last=False)
    return blob


def state_blobs(on_disk: Any, keys: Any) -> set[str]:
    """The blob ids a file's ``state`` names under ``keys`` (nothing when malformed)."""
    found: set[str] = set()
    if not isinstance(on_disk, dict) or not isinstance(keys, list | tuple):
        return found
    if "prd" in keys and isinstance(on_disk.get("prd"), str):
        found.add(on_disk["prd"])
    tasks = on_disk.get("tasks")
    if "tasks" in keys and isinstance(tasks, dict):
        found.update(v for v in tasks.values() if isinstance(v, str))
    return found


def file_blobs(data: Any) -> set[str]:
    """The state blob ids a raw checkpoint file (a dict) names."""
    if not isinstance(data, dict):
        return set()
    return state_blobs(data.get("state"), data.get(BLOBS_KEY))


def stored_keys(data: dict[str, Any]) -> tuple[str, ...]:
    """The ``state_blobs`` of a file's dict (``()``: inline); raises ``ValueError`` when
    malformed."""
    keys = data.get(BLOBS_KEY)
    if keys is None:
        return ()
    if not isinstance(keys, list) or any(k not in STORED_KEYS for k in keys):
        raise ValueError(f"{BLOBS_KEY} {keys!r} names unknown state keys")
    return tuple(keys)


def resolve_state(on_disk: Any, keys: tuple[str, ...], store: BlobStore) -> dict[str, Any]:
    """The state a file's ``state`` refers to; raises ``ValueError`` when a blob is missing
    or damaged (the checkpoint is then unreadable, never restored with a wrong state)."""
    if not isinstance(on_disk, dict):
        raise ValueError("state is not an object")
    state = dict(on_disk)
    try:
        if "prd" in keys:
            state["prd"] = _load(store, on_disk.get("prd"))
        if "tasks" in keys:
            tasks = on_disk.get("tasks")
            if not isinstance(tasks, dict):
                raise ValueError("state tasks is not an object of blob ids")
            state["tasks"] = {task: _load(store, blob) for task, blob in tasks.items()}
    except SnapshotError as exc:
        raise ValueError(f"its harness state cannot be read: {exc}") from None
    return state


_parsed: OrderedDict[tuple[Path, str], Any] = OrderedDict()


def _load(store: BlobStore, blob: Any) -> Any:
    """The JSON value blob ``blob`` holds. Blobs never change, so a parsed value is kept
    (most recently used first) and shared by the checkpoints naming it: a timeline's
    checkpoints name the same few task states again and again. Callers never mutate a
    checkpoint's state in place (they copy first), which sharing relies on."""
    if not isinstance(blob, str):
        raise ValueError(f"{blob!r} is not a blob id")
    key = (store.root, blob)
    with _cache_lock:
        if key in _parsed:
            _parsed.move_to_end(key)
            return _parsed[key]
    try:
        value = json.loads(store.get(blob))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"blob {blob[:12]} is not JSON ({exc})") from None
    with _cache_lock:
        _parsed[key] = value
        if len(_parsed) > _CACHE_ENTRIES:
            _parsed.popitem(last=False)
    return value
