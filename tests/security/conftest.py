"""The sandbox tests need bubblewrap: in CI they fail loudly without it, elsewhere they skip
with the reason shown (``-ra`` prints it)."""

from __future__ import annotations

import os

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
