"""The timeline: checkpoints on a session, and the one engine every go-back verb uses.

Recording (``Recorder``) is a cheap read of the session directory. Going back —
rewind, restart from a stage, reset to the seed — is always the same two halves:
``plan_*`` says what will change without writing anything (it is the dry-run and
the confirmation text), and ``execute_rewind`` carries the plan out crash-safely
through an intent journal that ``recover`` completes after a crash.
"""

from tilth.timeline.controller import TimelineController
from tilth.timeline.record.checkpoints import (
    Checkpoint,
    TimelineRead,
    list_checkpoints,
    read_timeline,
    resolve_checkpoint,
)
from tilth.timeline.record.recorder import Recorder
from tilth.timeline.rewind.executor import execute_rewind, open_for_writing, recover
from tilth.timeline.rewind.plan import SCOPES, RewindError, RewindPlan
from tilth.timeline.rewind.planner import plan_rewind

__all__ = [
    "SCOPES",
    "Checkpoint",
    "Recorder",
    "RewindError",
    "RewindPlan",
    "TimelineController",
    "TimelineRead",
    "execute_rewind",
    "list_checkpoints",
    "open_for_writing",
    "plan_rewind",
    "read_timeline",
    "recover",
    "resolve_checkpoint",
]
