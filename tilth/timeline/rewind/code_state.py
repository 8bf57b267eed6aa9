"""The code state Tilth last produced: what a go-back compares the worktree with.

A file that differs from this state was changed by hand since, and a go-back keeps it
(unless forced). The state is the newest turn checkpoint's code, or, after a restore,
``timeline/code-state.json``: ``{schema, head, overlay, after_seq}`` plus, after an undo,
``agent: {head, overlay}``.

Two views exist because an undo writes back a whole tree, the user's files in it included:
- the *written* state (``head`` + ``overlay``) is everything Tilth wrote last. Undo and redo
  compare with it, so redoing a restart takes away again the files the restart stashed;
- the *agent's* state (``agent``, else the written one) is what the agent had written when
  the undo point was taken. Every other go-back compares with it, so the user's files an
  undo put back stay the user's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tilth.errors import SessionCorrupt
from tilth.session.files import atomic_write_json, read_json
from tilth.session.schemas import SCHEMAS
from tilth.session.store import Session
from tilth.timeline.record.blob_store import session_store, write_entry
from tilth.timeline.record.checkpoints import highest_seq, list_checkpoints
from tilth.timeline.record.git_reads import read_head
from tilth.timeline.rewind.code_restore import Overlay, apply_overlay

CODE_STATE_SCHEMA = SCHEMAS["code-state"]


def _code_state_path(session: Session) -> Path:
    return session.dir / "timeline" / "code-state.json"


def _current_marker(session: Session) -> tuple[dict[str, Any] | None, Any]:
    """code-state.json when it is newer than every checkpoint, and the latest checkpoint."""
    checkpoints = [c for c in list_checkpoints(session) if not c.is_before]
    latest = checkpoints[-1] if checkpoints else None
    try:
        marker = read_json(_code_state_path(session), what="code-state.json")
    except (FileNotFoundError, SessionCorrupt):
        marker = None
    if isinstance(marker, dict) and marker.get("head"):
        if latest is None or int(marker.get("after_seq") or 0) >= latest.seq:
            return marker, latest
    return None, latest


def recorded_code_state(session: Session, *, agent: bool = False) -> tuple[str | None, Overlay]:
    """The newest code state Tilth itself produced: the latest checkpoint, or a later
    restore. ``agent`` asks for the agent's view (see the module's docstring)."""
    marker, latest = _current_marker(session)
    if marker is not None:
        part = marker.get("agent") if agent else None
        if not (isinstance(part, dict) and part.get("head")):
            part = marker
        return str(part["head"]), dict(part.get("overlay") or {})
    if latest is None:
        return None, {}
    return latest.head, dict(latest.overlay)


def note_code_state(session: Session) -> None:
    """Pin the newest recorded code state before the checkpoints holding it are deleted."""
    head, overlay = recorded_code_state(session)
    if head is None:
        return
    agent_head, agent_overlay = recorded_code_state(session, agent=True)
    agent = None
    if (agent_head, agent_overlay) != (head, overlay):
        agent = {"head": agent_head, "overlay": agent_overlay}
    _write_code_state(session, head, overlay, agent)


def _write_code_state(
    session: Session, head: str, overlay: Overlay, agent: dict[str, Any] | None
) -> None:
    data: dict[str, Any] = {
        "schema": CODE_STATE_SCHEMA,
        "head": head,
        "overlay": overlay,
        "after_seq": highest_seq(session),
    }
    if agent is not None:
        data["agent"] = {"head": agent["head"], "overlay": dict(agent.get("overlay") or {})}
    atomic_write_json(_code_state_path(session), data)


def restore_overlay(
    session: Session, worktree: Path, overlay: Overlay, keep: Overlay | None = None
) -> None:
    """The code step's second half (after reset + clean): overlay, kept files, note the state."""
    store = session_store(session)
    apply_overlay(worktree, overlay, store)
    for rel, entry in (keep or {}).items():
        write_entry(store, worktree, rel, entry)
    note_restored(session, worktree, overlay)


def note_restored(
    session: Session, worktree: Path, overlay: Overlay, agent: dict[str, Any] | None = None
) -> None:
    """Note that the worktree now holds HEAD + ``overlay``: the latest state Tilth wrote;
    ``agent`` (``{head, overlay}``), after an undo, the agent's state behind it."""
    _write_code_state(session, read_head(worktree), overlay, agent)
