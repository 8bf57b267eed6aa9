"""Fixtures for the web tests: a scripted run's session, the app in-process, real Chromium."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.agent.support import recipes
from tests.web.support import Built, build_session, fake_model
from tilth.config import load_settings
from tilth.demo.script import Team
from tilth.model import FakeServer
from tilth.web.app import create_app

TOKEN = "test-token-0123456789"
PORT = 8765
BASE = f"http://127.0.0.1:{PORT}"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def model(tilth_home: Path) -> Iterator[FakeServer]:
    """The loopback fake server playing a working scripted team."""
    with fake_model(Team(recipes())) as server:
        yield server


@pytest.fixture
def built(tmp_path: Path, model: FakeServer) -> Built:
    """Two tasks (L1) run to the end by the scripted team."""
    return build_session(tmp_path, model)


def app_client(token: str = TOKEN, **headers: str) -> TestClient:
    app = create_app(load_settings(), token, PORT)
    return TestClient(app, base_url=BASE, headers=headers, raise_server_exceptions=False)


@pytest.fixture
def client(tilth_home: Path) -> Iterator[TestClient]:
    """The app in-process, with the token in the Authorization header."""
    with app_client(Authorization=f"Bearer {TOKEN}") as test_client:
        yield test_client


def chromium_path() -> str | None:
    """Debian's chromium (or $TILTH_CHROMIUM); None when there is none."""
    for candidate in (os.environ.get("TILTH_CHROMIUM"), "/usr/bin/chromium", "chromium"):
        if candidate and (found := shutil.which(candidate)):
            return found
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Real Chromium through Playwright. Never skipped in CI: a missing browser fails there."""
    path = chromium_path()
    if path is None:
        message = "chromium is not installed (.ci/run installs it with apt-get)"
        if os.environ.get("CI"):
            pytest.fail(f"CI: {message}; browser tests must not be skipped", pytrace=False)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()
