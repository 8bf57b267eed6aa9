"""Tilth as a library (SPEC §10): find or open a session, run or resume it with injected
models and a progress sink, and drive its timeline. Pinned by ``tests/test_exported.py``;
docs/library.md shows it end to end. Names load on first use, so ``tilth --help`` stays fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

_WHERE = {
    # sessions
    "Session": "tilth.session.store",
    "SessionInfo": "tilth.session.discovery",
    "list_sessions": "tilth.library",
    "open_session": "tilth.library",
    "find_session": "tilth.library",
    "prepare": "tilth.library",
    "interview": "tilth.library",
    "delete_session": "tilth.library",
    # a session's health
    "doctor_checks": "tilth.library",
    "diagnose_session": "tilth.library",
    "repair_session": "tilth.library",
    # running
    "run": "tilth.library",
    "resume": "tilth.library",
    "Stop": "tilth.agent.stops",
    "StopReason": "tilth.agent.stops",
    "STOP_REASONS": "tilth.agent.stops",
    "Progress": "tilth.agent.run_context",
    "SilentProgress": "tilth.agent.progress_sinks",
    "ProgressLog": "tilth.agent.progress_sinks",
    # models
    "Model": "tilth.model.base",
    "ScriptedModel": "tilth.model.scripted",
    "Script": "tilth.model.script",
    # the timeline
    "open_timeline": "tilth.library",
    "TimelineController": "tilth.timeline.controller",
    "ExecuteResult": "tilth.timeline.controller",
    "Checkpoint": "tilth.timeline.record.checkpoints",
    "RewindPlan": "tilth.timeline.rewind.plan",
    # settings and errors
    "Settings": "tilth.config",
    "load_settings": "tilth.config",
    "TilthError": "tilth.errors",
}

__all__ = [
    "STOP_REASONS",
    "Checkpoint",
    "ExecuteResult",
    "Model",
    "Progress",
    "ProgressLog",
    "RewindPlan",
    "Script",
    "ScriptedModel",
    "Session",
    "SessionInfo",
    "Settings",
    "SilentProgress",
    "Stop",
    "StopReason",
    "TilthError",
    "TimelineController",
    "__version__",
    "delete_session",
    "diagnose_session",
    "doctor_checks",
    "find_session",
    "interview",
    "list_sessions",
    "load_settings",
    "open_session",
    "open_timeline",
    "prepare",
    "repair_session",
    "resume",
    "run",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'tilth' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from tilth.agent.progress_sinks import ProgressLog, SilentProgress
    from tilth.agent.run_context import Progress
    from tilth.agent.stops import STOP_REASONS, Stop, StopReason
    from tilth.config import Settings, load_settings
    from tilth.errors import TilthError
    from tilth.library import (
        delete_session,
        diagnose_session,
        doctor_checks,
        find_session,
        interview,
        list_sessions,
        open_session,
        open_timeline,
        prepare,
        repair_session,
        resume,
        run,
    )
    from tilth.model.base import Model
    from tilth.model.script import Script
    from tilth.model.scripted import ScriptedModel
    from tilth.session.discovery import SessionInfo
    from tilth.session.store import Session
    from tilth.timeline.controller import ExecuteResult, TimelineController
    from tilth.timeline.record.checkpoints import Checkpoint
    from tilth.timeline.rewind.plan import RewindPlan
