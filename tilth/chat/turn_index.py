"""A chat's turn checkpoints, kept in memory and re-read only where a file changed.

Listing turns is what the rewind picker, ``/checkpoints`` and every go-back start with;
a chat of a thousand turns has a thousand checkpoint files. The index stats them (cheap)
and parses only the new or rewritten ones, so the picker opens at once however long the
chat is. It reads what is on disk every time, so a rewind from the command line while the
chat is open is seen too.
"""

from __future__ import annotations

import os

from tilth.errors import SessionCorrupt
from tilth.session.files import read_json
from tilth.session.store import Session
from tilth.timeline.record.checkpoints import Checkpoint, checkpoint_path, stored_seqs

_Stamp = tuple[int, int, int]


class TurnIndex:
    """The chat's turns (``kind == "turn"``, actor ``chat``), oldest first."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._known: dict[int, tuple[_Stamp, Checkpoint | None]] = {}

    def turns(self) -> list[Checkpoint]:
        found: dict[int, tuple[_Stamp, Checkpoint | None]] = {}
        for seq in stored_seqs(self.session):
            path = checkpoint_path(self.session, seq)
            try:
                info = os.stat(path)
            except FileNotFoundError:
                continue
            stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
            known = self._known.get(seq)
            if known is not None and known[0] == stamp:
                found[seq] = known
                continue
            try:
                checkpoint: Checkpoint | None = Checkpoint.from_dict(
                    read_json(path, what="checkpoint")
                )
            except FileNotFoundError:
                continue
            except (SessionCorrupt, ValueError, TypeError):
                checkpoint = None  # reported by ``tilth checkpoints``; not a turn to offer
            found[seq] = (stamp, checkpoint)
        self._known = found
        return [
            cp
            for _, cp in (found[seq] for seq in sorted(found))
            if cp is not None and cp.kind == "turn" and cp.actor == "chat"
        ]
