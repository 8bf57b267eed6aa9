"""Lines of ``events.jsonl`` that are not events: named by ``tilth doctor``, set aside by
``--repair``.

Readers skip such a line (a disk that lost a block, a hand edit, a crash mid-append), so a
run goes on; but the history has a hole nobody was told about. The repair keeps every
damaged byte in ``events.damaged`` and blanks the line in place, so every byte offset a
checkpoint records still points where it did (a torn last line is cut, as the next append
would cut it).
"""

from __future__ import annotations

import os

from tilth.health.problem import Problem
from tilth.session.events import DamagedLine, damaged_lines
from tilth.session.store import Session

KEPT = "events.damaged"
"""Beside ``events.jsonl``: the damaged lines' bytes, each after a line saying where it was."""


def event_line_problem(session: Session) -> Problem | None:
    """The damaged lines of the session's event log, as one problem (None: there are none).

    A torn last line is left out while another process holds the session: that is a run
    writing its next event, not damage (the doctor's own hold, to repair, does not count).
    """
    found = damaged_lines(session.events.path)
    pid, alive = session.lock().owner()
    if alive and pid != os.getpid():  # ``doctor --repair`` holds the lock itself
        found = [line for line in found if not line.torn]
    if not found:
        return None
    shown = "; ".join(f"line {line.number}: {line.why}" for line in found[:5])
    more = f" (+{len(found) - 5} more)" if len(found) > 5 else ""
    return Problem(
        "event-lines",
        f"events.jsonl has {len(found)} line(s) that are not events, which every reader "
        f"skips: {shown}{more}",
        f"keep their bytes in {KEPT} and blank them in place (every checkpoint's byte offset "
        "into the log stays right; a torn last line is cut)",
    )


def repair_event_lines(session: Session) -> str:
    """Set the damaged lines aside and blank them (the caller holds the session lock)."""
    path = session.events.path
    found = damaged_lines(path)
    if not found:
        return "events.jsonl: no damaged lines"
    _keep(session, found)
    with open(path, "r+b") as log:
        for line in found:
            if line.torn:
                log.truncate(line.offset)
            else:
                log.seek(line.offset)
                log.write(b" " * (line.end - line.offset - 1))  # the newline stays
        log.flush()
        os.fsync(log.fileno())
    numbers = [line.number for line in found]
    session.log("records_repaired", record="event-lines", lines=numbers, kept=KEPT)
    return f"events.jsonl: set {len(found)} damaged line(s) aside in {KEPT} and blanked them"


def _keep(session: Session, found: list[DamagedLine]) -> None:
    """Append each damaged line's bytes to ``KEPT`` (read one by one: a log may be large)."""
    with open(session.events.path, "rb") as log, open(session.dir / KEPT, "ab") as kept:
        for line in found:
            where = f"# events.jsonl line {line.number} at byte {line.offset}: {line.why}\n"
            kept.write(where.encode())
            log.seek(line.offset)
            kept.write(log.read(line.end - line.offset).rstrip(b"\n") + b"\n")
        kept.flush()
        os.fsync(kept.fileno())
