"""The sandbox tests need bubblewrap: in CI they fail loudly without it, elsewhere they skip
with the reason shown (``-ra`` prints it)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tilth.tools.sandbox import probe


def require_sandbox() -> None:
    """Skip (visibly) or, under CI=true, fail when bubblewrap cannot make a sandbox here."""
    usable, detail = probe()
    if usable:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI must run the sandbox tests, but the sandbox is unavailable: {detail}")
    pytest.skip(f"bubblewrap sandbox unavailable on this machine: {detail}")


@pytest.fixture
def sandbox_usable() -> None:
    require_sandbox()


@pytest.fixture(autouse=True)
def no_key_in_any_session_file(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every security test: no file Tilth left under ``$TILTH_HOME`` (sessions, their
    worktrees, snapshots) holds the test API key (SPEC §3, the secret filter)."""
    if "tilth_home" not in request.fixturenames:
        yield
        return
    from agent.support import API_KEY

    # Asked for first, so it is torn down after this check.
    home: Path = request.getfixturevalue("tilth_home")
    yield
    found = []
    for here, _dirs, files in os.walk(home):
        for name in files:
            path = Path(here) / name
            if name == ".env" or not stat.S_ISREG(path.lstat().st_mode):
                continue
            with open(path, "rb") as handle:
                if API_KEY.encode() in handle.read():
                    found.append(str(path.relative_to(home)))
    assert found == [], f"the API key was written to {found}"
