"""The durable record of a session: layout, atomic files, event log, ledger, locks."""

from tilth.session.events import Event, EventLog
from tilth.session.store import STATUSES, Session

__all__ = ["STATUSES", "Event", "EventLog", "Session"]
