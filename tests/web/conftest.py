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
from tests.conftest import GIT_IDENTITY
from tests.web.support import Built, build_session, fake_model
from tilth.config import load_settings
from tilth.demo.script import Team
from tilth.model import FakeServer
from tilth.session.store import Session
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


@pytest.fixture(scope="session")
def built_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Built]:
    """One scripted run per worker, kept as a read-only template ``built`` copies per test.

    Sessions and git worktrees record absolute paths, so every test gets the copy at the
    same place (``live``) the template was made in.
    """
    root = tmp_path_factory.mktemp("web-built")
    live, saved = root / "live", root / "saved"
    with pytest.MonkeyPatch.context() as patch:
        for key in list(os.environ):
            if key.startswith("TILTH_"):
                patch.delenv(key)
        live.mkdir()
        (live / "tilth-home").mkdir()
        patch.setenv("TILTH_HOME", str(live / "tilth-home"))
        patch.chdir(live)
        for key, value in GIT_IDENTITY.items():
            patch.setenv(key, value)
        with fake_model(Team(recipes())) as server:
            template = build_session(live, server)
    shutil.copytree(live, saved, symlinks=True)
    return live, saved, template


@pytest.fixture
def built(
    built_template: tuple[Path, Path, Built], model: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> Built:
    """Two tasks (L1) run to the end by the scripted team (a fresh copy of one such run)."""
    live, saved, template = built_template
    shutil.rmtree(live)
    shutil.copytree(saved, live, symlinks=True)
    home = live / "tilth-home"
    monkeypatch.setenv("TILTH_HOME", str(home))
    session = Session.open(home / "sessions", template.id)
    return Built(
        session,
        template.repo,
        template.worktree,
        template.seed_sha,
        {**template.env, "TILTH_BASE_URL": model.base_url},
    )


def app_client(token: str = TOKEN, **headers: str) -> TestClient:
    app = create_app(load_settings(), token, PORT)
    return TestClient(app, base_url=BASE, headers=headers, raise_server_exceptions=False)


@pytest.fixture
def client(tilth_home: Path, request: pytest.FixtureRequest) -> Iterator[TestClient]:
    """The app in-process, with the token in the Authorization header."""
    if "built" in request.fixturenames:
        request.getfixturevalue("built")  # the app reads the TILTH_HOME ``built`` sets
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


@pytest.fixture(autouse=True)
def _pages_closed_after_each_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test's browser contexts are closed when it ends. A page left open keeps running
    for the rest of the suite, its event stream retrying a server that is gone every second."""
    yield
    if "browser" in request.fixturenames:
        for context in request.getfixturevalue("browser").contexts:
            context.close()
