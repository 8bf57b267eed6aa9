"""``tilth demo --live`` without an endpoint (the scripted story is checked in tests/e2e)."""

from __future__ import annotations

from pathlib import Path

from agent.support import tilth


def test_live_demo_without_an_endpoint_is_a_clean_usage_error(
    tmp_path: Path, tilth_home: Path
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = tilth("demo", "--live", env={"TMPDIR": str(scratch)})
    assert result.returncode == 2
    assert "TILTH_BASE_URL" in result.stderr and "Traceback" not in result.stderr
    assert list(scratch.iterdir()) == []  # nothing was created
