"""Fixtures for model tests: models aimed at a loopback fake server, a closed port."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest

from tilth.config import Endpoint
from tilth.model import FakeServer, OpenAIModel

SECRET_KEY = "sk-test-5ecr3t-value"


@pytest.fixture
def secret_key() -> str:
    """The API key every test endpoint uses (so tests can look for leaks)."""
    return SECRET_KEY


@pytest.fixture
def fast_model() -> Callable[..., OpenAIModel]:
    """``fast_model(server, **options)``: an ``OpenAIModel`` whose retries wait milliseconds."""

    def build(
        server: FakeServer | None, *, model: str = "test-model", **options: Any
    ) -> OpenAIModel:
        base_url = options.pop("base_url", None) or (server.base_url if server else "")
        endpoint = Endpoint(
            role=options.pop("role", "worker"),
            base_url=base_url,
            api_key=SECRET_KEY,
            model=model,
        )
        options.setdefault("backoff_seconds", 0.001)
        options.setdefault("timeout_seconds", 30.0)
        return OpenAIModel(endpoint, **options)

    return build


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
