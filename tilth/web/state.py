"""What one running ``tilth serve`` holds: settings, token, background runs, log watches."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from tilth.config import Settings
from tilth.web.runs import Runs
from tilth.web.stream import Watches


@dataclass
class ServerState:
    """Shared by every request of one server."""

    settings: Settings
    token: str
    port: int
    runs: Runs
    watches: Watches = field(default_factory=Watches)
    chats: dict[str, Any] = field(default_factory=dict)
    """Chat engines open in this server, by session id."""


def state_of(request: Request) -> ServerState:
    """The server state of the app handling ``request``."""
    state: ServerState = request.app.state.tilth
    return state
