"""What a task's other attempts have spent: every attempt's tokens count toward the
session's caps as they are spent (SPEC §11), so K attempts at once cannot together run
past ``TILTH_MAX_TOKENS`` by more than the turn each has in flight.

Each attempt's own count is in its ``checkpoint.json`` (written after every turn); its
siblings are listed by the parent's ``attempts_started`` event. Reading K small files
before a turn is cheap, and works for attempts run by workers on other machines too.

The parent's own count takes its attempts' spend in when the winner is grafted; until
then (a cap or Ctrl-C stopped the run half-way through them) ``undecided`` finds them, so
the parent's caps and its run summary count what they spent too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
        siblings = self._siblings if self._siblings is not None else self._load()
        if siblings is None or self._base is None:
            return 0
        total = 0
        for sibling in siblings:
            try:
                total += max(0, sibling.tokens_used - self._base)
            except (OSError, TilthError):  # a sibling being deleted: it spends no more
                continue
        return total

    def fork_tokens(self) -> int | None:
        """The session's count when the attempts were forked (None: unknown)."""
        if self._base is None:
            self._load()
        return self._base

    def _load(self) -> list[Session] | None:
        """The siblings the parent lists now (None: not yet); kept once all are listed."""
        parent_id = str(self.record.get("parent") or "")
        parent = Session(parent_id, self.session.dir.parent / parent_id)
        start = str(self.record.get("checkpoint") or "")
        if not parent_id or not parent.events.path.is_file():
            return None
        try:
            tokens = resolve_checkpoint(parent, start).state.get("tokens_used")
        except TilthError:
            return None
        self._base = tokens if isinstance(tokens, int) else 0
        ids: list[str] | None = None
        for payload in payloads_of(parent.events.path, "attempts_started"):
            if payload.get("checkpoint") == start and payload.get("task_id") == self.record.get(
                "task_id"
            ):
                ids = [str(i) for i in payload.get("attempts") or []]  # the latest wins
        if ids is None:
            return None
        siblings = [Session(i, parent.dir.parent / i) for i in ids if i != self.session.id]
        asked = self.record.get("of")
        if not isinstance(asked, int) or len(ids) >= asked:
            # All listed: kept. Fewer (a stop came while they were forked; the resume forks
            # the rest and lists them all again): these count, and the list is read again.
            self._siblings = siblings
        return siblings


@dataclass(frozen=True)
class Undecided:
    """The attempts of ``parent``'s last best-of-N that no ``attempt_selected`` decided yet
    (a cap or Ctrl-C stopped the run half-way through them)."""

    task_id: str
    checkpoint: str
    base: int
    """The parent's token count at the fork: where every attempt's own count began."""
    attempts: tuple[Session, ...]

    def spent(self) -> list[tuple[Session, int]]:
        """Each attempt with what it spent since the fork (0 for one being deleted)."""
        found = []
        for attempt in self.attempts:
            try:
                found.append((attempt, max(0, attempt.tokens_used - self.base)))
            except (OSError, TilthError):
                found.append((attempt, 0))
        return found

    def total(self) -> int:
        """What they spent together: counted toward the parent's caps and its summary,
        though the parent's own count takes it in only when the winner is chosen."""
        return sum(tokens for _, tokens in self.spent())


def undecided(parent: Session) -> Undecided | None:
    """``parent``'s undecided attempts (None: there are none)."""
    started = list(payloads_of(parent.events.path, "attempts_started"))
    if not started:
        # A run killed while its attempts were forked never listed them: their own records
        # name the task's start (the resume adopts them, ``task._earlier``).
        started = _unlisted(parent)
        if not started:
            return None
    last = started[-1]
    task_id, checkpoint = str(last.get("task_id")), str(last.get("checkpoint"))
    if any(
        p.get("task_id") == task_id and p.get("checkpoint") == checkpoint
        for p in payloads_of(parent.events.path, "attempt_selected")
    ):
        return None
    if _task_over(parent, task_id):
        return None
    ids = [str(i) for i in last.get("attempts") or []]
    found = tuple(Session(i, parent.dir.parent / i) for i in ids)
    existing = tuple(s for s in found if s.dir.is_dir())
    if not existing:
        return None
    try:
        tokens = resolve_checkpoint(parent, checkpoint).state.get("tokens_used")
    except TilthError:
        tokens = None
    base = tokens if isinstance(tokens, int) else parent.tokens_used
    return Undecided(task_id, checkpoint, base, existing)


def attempt_children(parent: Session) -> dict[str, dict[str, Any]]:
    """Attempt sessions of ``parent`` by id: their ``attempt`` records."""
    found: dict[str, dict[str, Any]] = {}
    if not parent.dir.parent.is_dir():
        return found
    for path in sorted(parent.dir.parent.iterdir()):
        record_path = path / "checkpoint.json"
        if path.name == parent.id or not record_path.is_file():
            continue
        try:
            record = Session(path.name, path).record().extra.get("attempt")
        except TilthError:  # an unreadable record is no one's attempt
            continue
        if isinstance(record, dict) and record.get("parent") == parent.id:
            found[path.name] = record
    return found


def attempt_sessions(parent: Session) -> list[Session]:
    """The attempt sessions ``parent`` made (deleted with it)."""
    return [Session(i, parent.dir.parent / i) for i in attempt_children(parent)]


def _unlisted(parent: Session) -> list[dict[str, Any]]:
    """An ``attempts_started`` payload made from the attempt records of ``parent``'s
    children, for a parent whose log lists none (empty: it has no attempts)."""
    records = attempt_children(parent)
    if not records:
        return []
    newest = max(records.items(), key=lambda item: item[0])[1]
    task_id, checkpoint = newest.get("task_id"), newest.get("checkpoint")
    ids = sorted(
        (
            i
            for i, r in records.items()
            if r.get("task_id") == task_id and r.get("checkpoint") == checkpoint
        ),
        key=lambda i: (
            records[i].get("number") if isinstance(records[i].get("number"), int) else 0,
            i,
        ),
    )
    return [{"task_id": task_id, "checkpoint": checkpoint, "attempts": ids}]


def undecided_spend(parent: Session) -> int:
    """What ``parent``'s undecided attempts spent since their fork (0: none are)."""
    found = undecided(parent)
    return found.total() if found is not None else 0


class UndecidedSpend:
    """A parent run's ``RunContext.shared_tokens``: what the attempts an earlier invocation
    left undecided have spent, until this run decides them (its task is then over and the
    winner's graft has put every attempt's spend into the parent's own count)."""

    def __init__(self, parent: Session) -> None:
        self.parent = parent
        self.found = undecided(parent)

    def __call__(self) -> int:
        if self.found is None:
            return 0
        if _task_over(self.parent, self.found.task_id):
            self.found = None
            return 0
        return self.found.total()


def _task_over(parent: Session, task_id: str) -> bool:
    """True once ``parent``'s task ``task_id`` is done or failed (its attempts decided)."""
    status = next((t.status for t in parent.tasks() if t.id == task_id), None)
    return status in ("done", "failed")
