"""Which environment files in a session's worktree may choose the project's environment.

A virtualenv (or ``uv.lock``) in the worktree comes first in SPEC §5.4's order, but the
worker writes the worktree: a ``.venv/bin/python`` it made would be probed by Tilth,
outside the sandbox, on the next ``run``, and then judge every gate. So Tilth records
what the worktree holds when nothing but Tilth has touched it — right after it made the
worktree and ran ``TILTH_SETUP_COMMAND``, or at the first ``run`` of a session with no
record — and only those entries count later. The record lives in the session
directory, which the worker's sandbox hides.
"""

from __future__ import annotations

from pathlib import Path

from tilth.errors import SessionCorrupt
from tilth.project_env import WORKTREE_ENTRIES, worktree_entries
from tilth.session.events import payloads_of
from tilth.session.files import atomic_write_json
from tilth.session.records import read_worktree_env
from tilth.session.schemas import SCHEMAS
from tilth.session.store import Session

RECORD = "worktree-env.json"
SCHEMA = SCHEMAS["worktree-env"]


def record_worktree_env(session: Session, worktree: Path) -> set[str]:
    """Note the environment entries ``worktree`` holds now as trusted; returns them."""
    found = worktree_entries(worktree)
    atomic_write_json(
        session.dir / RECORD,
        {"schema": SCHEMA, "worktree": str(worktree), "trusted": sorted(found)},
    )
    return found


def trusted_worktree_env(session: Session, worktree: Path) -> set[str]:
    """The entries of ``WORKTREE_ENTRIES`` that may choose this session's environment.

    Without a record (a session from an older Tilth, or made without ``prepare_worktree``)
    the worktree is recorded now when no worker tool has run in it yet; otherwise nothing
    in it is trusted (and that is recorded, so a later run agrees).
    """
    path = session.dir / RECORD
    try:
        stored = read_worktree_env(path)
    except SessionCorrupt:
        return set()  # damaged: trust nothing rather than guess (`tilth doctor` names it)
    if stored is not None:
        return set(stored["trusted"]) & set(WORKTREE_ENTRIES)
    if next(payloads_of(session.events.path, "tool_call"), None) is None:
        return record_worktree_env(session, worktree)
    atomic_write_json(path, {"schema": SCHEMA, "worktree": str(worktree), "trusted": []})
    return set()
