"""The live tier: Tilth against llama.cpp's real ``llama-server`` (``make test-live``).

Not part of ``make test`` (``norecursedirs`` leaves this directory out unless it is named).
The server and model come from the cache ``make live-deps`` fills; without them the tier
skips with the command to run, except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

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


SERVERS: dict[str, dict[str, Any]] = {
    "llama": {"context": 8192},
    "llama_small": {"context": 4096, "slots": 2},
    "llama_plain": {"tool_template": False},
}
"""The tier's servers by fixture name: one with the tool template; one whose two slots each
have a 2,048-token window, which a few long turns overflow (the second slot takes the
summarizer's request, so the chat's thread stays cached in the first: after a summary only
the summary is new to the server); one started without a tool template, whose fallback
template cannot take tools. Each is started once for the session: a server's flags decide
what can share it, and its cached prompts carry over from test to test."""


@pytest.fixture(scope="session")
def llama_servers(
    live_cache: None, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, LlamaServer]]:
    """The servers the selected tests use, loading side by side (a few seconds each, mostly
    one core reading the model's vocabulary), stopped at the end of the session."""
    wanted = {name for item in request.session.items for name in item.fixturenames}
    servers = {
        name: LlamaServer(tmp_path_factory.mktemp(name.replace("_", "-")), **options)
        for name, options in SERVERS.items()
        if name in wanted
    }
    with contextlib.ExitStack() as stack:
        for server in servers.values():
            stack.callback(server.stop)
            server.start()
        for server in servers.values():
            server.wait_ready()
        yield servers


@pytest.fixture
def llama(llama_servers: dict[str, LlamaServer]) -> LlamaServer:
    """The server with the tool template and an 8,192-token window."""
    return llama_servers["llama"]


@pytest.fixture
def proxy(llama: LlamaServer) -> Iterator[RecordingProxy]:
    """A recording pass-through to the shared server, fresh for each test."""
    with RecordingProxy(llama.port) as relay:
        yield relay


@pytest.fixture
def llama_small(llama_servers: dict[str, LlamaServer]) -> LlamaServer:
    """The server with the tool template and two slots of 2,048 tokens."""
    return llama_servers["llama_small"]


@pytest.fixture
def llama_plain(llama_servers: dict[str, LlamaServer]) -> LlamaServer:
    """The server started without a tool template."""
    return llama_servers["llama_plain"]
