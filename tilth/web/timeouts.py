"""Connections that never finish a request are closed (a slow-loris holds no socket).

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive``, but waits for
ever on one that sends its request headers a byte at a time, or nothing at all. This
protocol gives every request ``HEADER_SECONDS`` from the connection (or the previous
response) to arrive whole; a request that has begun is left alone (an event stream
runs as long as the page stays open).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from tilth.errors import ConfigError

HEADER_SECONDS = 10.0
IDLE_SECONDS = 5.0
HEADER_ENV = "TILTH_SERVE_HEADER_SECONDS"
"""Another deadline than ``HEADER_SECONDS`` (tests; read from the process environment only)."""


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's headers."""

    header_seconds: float = HEADER_SECONDS
    _deadline: asyncio.TimerHandle | None = None
    _waiting_since: Any = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._waiting_since = self.cycle  # a new request replaces the cycle
        self._deadline = self.loop.call_later(self.header_seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.cycle is self._waiting_since and not self.transport.is_closing():
            self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def header_seconds(environ: Mapping[str, str]) -> float:
    """The request-header deadline: ``TILTH_SERVE_HEADER_SECONDS`` when set, else 10 s."""
    raw = environ.get(HEADER_ENV, "").strip()
    if not raw:
        return HEADER_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise ConfigError(f"{HEADER_ENV} must be a number of seconds above 0, got {raw!r}")
    return value


def deadline_protocol(seconds: float) -> type[DeadlineH11Protocol]:
    """``DeadlineH11Protocol`` with ``seconds`` for each request's headers."""
    return type("DeadlineH11Protocol", (DeadlineH11Protocol,), {"header_seconds": seconds})
