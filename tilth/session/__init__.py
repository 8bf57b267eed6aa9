"""The durable record of a session: layout, atomic files, event log, ledger, locks.

The names below load on first use (``tilth.faces``); the front ends import them from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilth.faces import lazy_face

if TYPE_CHECKING:
    from tilth.session.discovery import describe as describe
    from tilth.session.discovery import session_ids as session_ids
    from tilth.session.discovery import state_of as state_of
    from tilth.session.events import LINE_HEAD as LINE_HEAD
    from tilth.session.events import Event as Event
    from tilth.session.events import EventLog as EventLog
    from tilth.session.events import utc_now as utc_now
    from tilth.session.files import atomic_write_text as atomic_write_text
    from tilth.session.files import read_at as read_at
    from tilth.session.files import read_json as read_json
    from tilth.session.lock import pid_alive as pid_alive
    from tilth.session.pipelines import stages_for as stages_for
    from tilth.session.records import read_seed_meta as read_seed_meta
    from tilth.session.records import read_task_state as read_task_state
    from tilth.session.store import STATUSES as STATUSES
    from tilth.session.store import Session as Session
    from tilth.session.store import is_session_id as is_session_id
    from tilth.session.task import Task as Task
    from tilth.session.teardown import recorded_source as recorded_source

__getattr__, __dir__ = lazy_face(__name__, __file__)
