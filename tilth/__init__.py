"""Tilth as a library (SPEC §10): find or open a session, run or resume it with injected
models and a progress sink, and drive its timeline. Pinned by ``tests/test_exported.py``;
docs/library.md shows it end to end. Names load on first use, so ``tilth --help`` stays fast.

The names below are written once: each ``TYPE_CHECKING`` import is one public name, which
``tilth.faces.lazy_face`` imports from there when it is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilth.faces import lazy_face

__version__ = "0.2.0"

if TYPE_CHECKING:
    from tilth.agent.progress_sinks import ProgressLog as ProgressLog
    from tilth.agent.progress_sinks import SilentProgress as SilentProgress
    from tilth.agent.run_context import Progress as Progress
    from tilth.agent.stops import STOP_REASONS as STOP_REASONS
    from tilth.agent.stops import Stop as Stop
    from tilth.agent.stops import StopReason as StopReason
    from tilth.config import Settings as Settings
    from tilth.config import load_settings as load_settings
    from tilth.errors import TilthError as TilthError
    from tilth.library import delete_session as delete_session
    from tilth.library import diagnose_session as diagnose_session
    from tilth.library import doctor_checks as doctor_checks
    from tilth.library import find_session as find_session
    from tilth.library import interview as interview
    from tilth.library import list_sessions as list_sessions
    from tilth.library import open_session as open_session
    from tilth.library import open_timeline as open_timeline
    from tilth.library import prepare as prepare
    from tilth.library import repair_session as repair_session
    from tilth.library import resume as resume
    from tilth.library import run as run
    from tilth.model.base import Model as Model
    from tilth.model.script import Script as Script
    from tilth.model.scripted import ScriptedModel as ScriptedModel
    from tilth.session.discovery import SessionInfo as SessionInfo
    from tilth.session.store import Session as Session
    from tilth.timeline.controller import ExecuteResult as ExecuteResult
    from tilth.timeline.controller import TimelineController as TimelineController
    from tilth.timeline.record.checkpoints import Checkpoint as Checkpoint
    from tilth.timeline.rewind.plan import RewindPlan as RewindPlan

__getattr__, __dir__ = lazy_face(__name__, __file__)
