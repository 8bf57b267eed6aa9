"""A chat's turn checkpoints, kept in memory and re-read only where a file changed.

Listing turns is what the rewind picker, ``/checkpoints`` and every go-back start with;
a chat of a thousand turns has a thousand checkpoint files. The index stats them (cheap)
and parses only the new or rewritten ones, so the picker opens at once however long the
chat is. It reads what is on disk every time, so a rewind from the command line while the
chat is open is seen too.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from tilth.errors import SessionCorrupt
from tilth.session.store import Session
from tilth.timeline.record.checkpoints import Checkpoint, checkpoints_dir, read_checkpoint

_Stamp = tuple[int, int, int]
_FILE = re.compile(r"^cp-(\d+)\.json$")


SETTLED_NS = 2_000_000_000
"""A directory unchanged for this long, and since the last look, need not be listed again:
every checkpoint is written by an atomic rename, which changes the directory's mtime."""


class TurnIndex:
    """The chat's turns (``kind == "turn"``, actor ``chat``), oldest first."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._known: dict[int, tuple[_Stamp, Checkpoint | None]] = {}
        self._dir_stamp: tuple[int, int] | None = None
        self._turns: list[Checkpoint] = []

    def turns(self) -> list[Checkpoint]:
        folder = checkpoints_dir(self.session)
        try:
            info = os.stat(folder)
        except FileNotFoundError:
            self._known, self._dir_stamp, self._turns = {}, None, []
            return []
        stamp = (info.st_ino, info.st_mtime_ns)
        settled = time.time_ns() - info.st_mtime_ns > SETTLED_NS
        if settled and stamp == self._dir_stamp:
            return list(self._turns)
        self._turns = self._read(folder)
        self._dir_stamp = stamp if settled else None
        return list(self._turns)

    def _read(self, folder: str | os.PathLike[str]) -> list[Checkpoint]:
        found: dict[int, tuple[_Stamp, Checkpoint | None]] = {}
        with os.scandir(folder) as entries:
            for entry in entries:
                named = _FILE.match(entry.name)
                if named is None:
                    continue
                seq = int(named.group(1))
                try:
                    info = entry.stat()
                except FileNotFoundError:
                    continue
                stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
                known = self._known.get(seq)
                if known is not None and known[0] == stamp:
                    found[seq] = known
                    continue
                try:
                    checkpoint: Checkpoint | None = read_checkpoint(self.session, Path(entry.path))
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
