"""The timeline: checkpoints on a session, and the one engine every go-back verb uses.

Recording (``Recorder``) is a cheap read of the session directory. Going back —
rewind, restart from a stage, reset to the seed — is always the same two halves:
``plan_*`` says what will change without writing anything (it is the dry-run and
the confirmation text), and ``execute_rewind`` carries the plan out crash-safely
through an intent journal that ``recover`` completes after a crash.

The names below load on first use (``tilth.faces``); the front ends import them from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilth.faces import lazy_face

if TYPE_CHECKING:
    from tilth.timeline.controller import TimelineController as TimelineController
    from tilth.timeline.record.checkpoints import Checkpoint as Checkpoint
    from tilth.timeline.record.checkpoints import TimelineRead as TimelineRead
    from tilth.timeline.record.checkpoints import list_checkpoints as list_checkpoints
    from tilth.timeline.record.checkpoints import read_checkpoint as read_checkpoint
    from tilth.timeline.record.checkpoints import read_timeline as read_timeline
    from tilth.timeline.record.checkpoints import resolve_checkpoint as resolve_checkpoint
    from tilth.timeline.record.log_epoch import epoch_path as epoch_path
    from tilth.timeline.record.log_epoch import read_epoch as read_epoch
    from tilth.timeline.record.recorder import Recorder as Recorder
    from tilth.timeline.rewind.executor import execute_rewind as execute_rewind
    from tilth.timeline.rewind.executor import open_for_writing as open_for_writing
    from tilth.timeline.rewind.executor import recover as recover
    from tilth.timeline.rewind.plan import SCOPES as SCOPES
    from tilth.timeline.rewind.plan import RewindError as RewindError
    from tilth.timeline.rewind.plan import RewindPlan as RewindPlan
    from tilth.timeline.rewind.planner import plan_rewind as plan_rewind
    from tilth.timeline.rewind.restart import completed_stages_by_task as completed_stages_by_task
    from tilth.timeline.rewind.seed_reset import CONFIRM_WARNING as CONFIRM_WARNING
    from tilth.timeline.rewind.seed_reset import source_hint as source_hint
    from tilth.timeline.rewind.summarize import SummaryPlan as SummaryPlan

__getattr__, __dir__ = lazy_face(__name__, __file__)
