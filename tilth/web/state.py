"""What one running ``tilth serve`` holds: settings, token, background runs, log watches."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from starlette.requests import Request

from tilth.config import Settings
from tilth.web.chats import ChatEngines
from tilth.web.runs import Runs
from tilth.web.stream import Watches

if TYPE_CHECKING:
    from tilth import Model


@dataclass
class ServerState:
    """Shared by every request of one server."""

    settings: Settings
    token: str
    port: int
    runs: Runs
    watches: Watches = field(default_factory=Watches)
    chats: ChatEngines = field(init=False)
    """Chat engines open in this server, by session id."""
    chat_model: Callable[[], Model] | None = None
    """Makes the chat's model (default: the worker role's configured endpoint)."""

    def __post_init__(self) -> None:
        self.chats = ChatEngines(self.settings, self.chat_model)


def state_of(request: Request) -> ServerState:
    """The server state of the app handling ``request``."""
    state: ServerState = request.app.state.tilth
    return state
