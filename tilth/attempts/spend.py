"""What a task's other attempts have spent: every attempt's tokens count toward the
session's caps as they are spent (SPEC §11), so K attempts at once cannot together run
past ``TILTH_MAX_TOKENS`` by more than the turn each has in flight.

Each attempt's own count is in its ``checkpoint.json`` (written after every turn); its
siblings are listed by the parent's ``attempts_started`` event. Reading K small files
before a turn is cheap, and works for attempts run by workers on other machines too.
"""

from __future__ import annotations

from tilth.errors import TilthError
from tilth.session.events import payloads_of
from tilth.session.store import Session
from tilth.timeline.record.checkpoints import resolve_checkpoint


class SiblingSpend:
    """Tokens the other attempts of ``session``'s task spent since their common fork."""

    def __init__(self, session: Session, record: dict[str, object]) -> None:
        self.session = session
        self.record = record
        self._siblings: list[Session] | None = None
        self._base: int | None = None

    def __call__(self) -> int:
        """Their spend now (0 while the parent's records cannot be read)."""
        if self._siblings is None and not self._load():
            return 0
        assert self._siblings is not None and self._base is not None
        total = 0
        for sibling in self._siblings:
            try:
                total += max(0, sibling.tokens_used - self._base)
            except (OSError, TilthError):  # a sibling being deleted: it spends no more
                continue
        return total

    def _load(self) -> bool:
        parent_id = str(self.record.get("parent") or "")
        parent = Session(parent_id, self.session.dir.parent / parent_id)
        start = str(self.record.get("checkpoint") or "")
        if not parent_id or not parent.events.path.is_file():
            return False
        try:
            tokens = resolve_checkpoint(parent, start).state.get("tokens_used")
        except TilthError:
            return False
        self._base = tokens if isinstance(tokens, int) else 0
        for payload in payloads_of(parent.events.path, "attempts_started"):
            if payload.get("checkpoint") == start and payload.get("task_id") == self.record.get(
                "task_id"
            ):
                ids = [str(i) for i in payload.get("attempts") or [] if i != self.session.id]
                self._siblings = [Session(i, parent.dir.parent / i) for i in ids]
                return True
        return False
