"""The live tier: Tilth against llama.cpp's real ``llama-server`` (``make test-live``).

Not part of ``make test`` (``norecursedirs`` leaves this directory out unless it is named).
The server and model come from the cache ``make live-deps`` fills; without them the tier
skips with the command to run, except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.live import deps
from tests.live.proxy import RecordingProxy
from tests.live.server import LlamaServer


@pytest.fixture(scope="session")
def live_cache() -> None:
    """The cached server and model, or a skip (a failure under ``CI=true``)."""
    missing = deps.missing()
    if missing is None:
        return
    message = f"live tier: {missing}; run `make live-deps`"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def llama(live_cache: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """One server with the tool template, shared by the tier."""
    with LlamaServer(tmp_path_factory.mktemp("llama"), context=8192) as server:
        yield server


@pytest.fixture
def proxy(llama: LlamaServer) -> Iterator[RecordingProxy]:
    """A recording pass-through to the shared server, fresh for each test."""
    with RecordingProxy(llama.port) as relay:
        yield relay


@pytest.fixture(scope="module")
def llama_small(
    live_cache: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    """A server with a 2,048-token window, which a few long turns overflow."""
    with LlamaServer(tmp_path_factory.mktemp("llama-small"), context=2048) as server:
        yield server


@pytest.fixture(scope="session")
def llama_plain(
    live_cache: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    """A server started without a tool template: its fallback template cannot take tools."""
    with LlamaServer(tmp_path_factory.mktemp("llama-plain"), tool_template=False) as server:
        yield server
