"""The one table of persisted record kinds: each kind's current schema and its version key.

Every writer stamps its record with ``stamp(kind)`` and ``tilth.session.migrations`` brings
older records up to ``SCHEMAS[kind]``; neither keeps a number of its own, so a kind's
version changes in exactly one place (and a migration that reaches past it is refused by
``tests/timeline/test_migrations.py``).

The version key is ``schema`` in every record but two whose shape is fixed from outside:
``events.jsonl`` lines keep ``v`` (SPEC §4's ``{ts, type, payload, ...}`` lines, which
outside tests and the log's byte-level line reader rely on, start ``{"v": 1, "seq": ...``)
and ``summary.json`` keeps ``version`` (the reference harness's summary shape; it is derived
and rebuilt from the log, never read back). ``prd.json`` is a bare list (SPEC §4) and carries
none. Line records written before the key was unified carry ``v``; readers accept both.
"""

from __future__ import annotations

from typing import Final

SCHEMAS: Final[dict[str, int]] = {
    # JSON files
    "session": 2,  # checkpoint.json, the session record
    "task": 2,  # tasks/<T-NNN>.json, one task's harness state
    "checkpoint": 3,  # timeline/checkpoints/cp-NNNN.json, a point on the timeline
    "plan": 2,  # a go-back plan, inside the intent journal
    "journal": 1,  # timeline/journal.json, an interrupted go-back
    "code-state": 1,  # a checkpoint's code (tree, head, overlay)
    "manifest": 1,  # a directory snapshot's file list
    "archive": 1,  # an undo point's archive metadata
    "worktree-env": 1,  # worktree-env.json
    "seed-meta": 1,  # seed-meta.json
    "intent": 1,  # the seed sink's intent record
    "summary": 1,  # summary.json (key "version", see above)
    # line records (.jsonl)
    "events": 1,  # events.jsonl (key "v", see above)
    "threads": 1,  # threads/<key>.jsonl
    "ledger": 1,  # ledger/<T-NNN>.jsonl
    "ops": 1,  # timeline/ops.jsonl, the operations log
}

VERSION_KEY: Final = "schema"
"""The version key of every record but those named in ``KEY_EXCEPTIONS``."""

KEY_EXCEPTIONS: Final[dict[str, str]] = {"events": "v", "summary": "version"}

OLD_LINE_KEY: Final = "v"
"""What line records (and task states) were numbered with before the key was unified."""


def version_key(kind: str) -> str:
    """The key that holds the schema number of a record of ``kind``."""
    return KEY_EXCEPTIONS.get(kind, VERSION_KEY)


def stamp(kind: str) -> dict[str, int]:
    """``{key: current schema}`` for a record of ``kind`` about to be written."""
    return {version_key(kind): SCHEMAS[kind]}
