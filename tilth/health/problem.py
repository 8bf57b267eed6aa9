"""One thing wrong with a session, as ``tilth doctor`` names it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a session, and how (or whether) it can be put right."""

    key: str
    """``checkpoint``, ``source``, ``events``, ``prd``, ``journal``, ``branch``, ``worktree``,
    ``head``; and the records ``tasks``, ``seed-meta``, ``ledger``, ``thread``,
    ``worktree-env``, ``checkpoints`` (``tilth.health.records``)."""
    what: str
    fix: str | None
    """What ``repair`` will do; None when the record cannot fix it."""
    hint: str | None = None
    """What the user can do when there is no fix."""

    def as_dict(self) -> dict[str, Any]:
        return {"problem": self.key, "what": self.what, "fix": self.fix, "hint": self.hint}
