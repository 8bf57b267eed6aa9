"""The run's caps: the interview's tokens do not count toward TILTH_MAX_TOKENS (bug 12.1-10)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tilth.agent.run_context import RunContext
from tilth.agent.stops import StopRun
from tilth.config import load_settings
from tilth.model.script import Script
from tilth.model.scripted import ScriptedModel
from tilth.session.store import Session


class _Quiet:
    def status(self, **_: object) -> None:
        pass

    def note(self, text: str, style: str | None = None) -> None:
        pass


def _context(tmp_path: Path, max_tokens: int, minutes: str = "120") -> RunContext:
    settings = load_settings(
        {
            "TILTH_HOME": str(tmp_path),
            "TILTH_MAX_TOKENS": str(max_tokens),
            "TILTH_MAX_WALL_CLOCK_MINUTES": minutes,
        }
    )
    session = Session.create(settings.sessions_dir, tmp_path)
    session.log("session_prepared", tokens_used=100)
    session.update_checkpoint(tokens_used=150)
    model = ScriptedModel(Script([]))
    return RunContext(
        session, settings, tmp_path, model, model, None, _Quiet(), started=time.monotonic()
    )


def test_interview_tokens_do_not_count_toward_the_run_cap(tmp_path: Path) -> None:
    ctx = _context(tmp_path, max_tokens=60)
    assert ctx.run_tokens() == 50
    ctx.check_caps()


def test_run_tokens_reaching_the_cap_stop_the_run(tmp_path: Path) -> None:
    ctx = _context(tmp_path, max_tokens=50)
    with pytest.raises(StopRun) as stop:
        ctx.check_caps()
    assert stop.value.reason == "token_cap"
    assert "TILTH_MAX_TOKENS=50" in stop.value.detail
