"""The chat endpoint: ``POST /api/sessions/<id>/messages {text}`` for chat sessions."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from tilth.errors import UsageError
from tilth.web import views
from tilth.web.state import state_of


async def messages(request: Request) -> Response:
    state = state_of(request)
    session = views.open_session(state.settings, str(request.path_params["session_id"]))
    if views.session_kind(session.checkpoint()) != "chat":
        raise UsageError(
            f"session {session.id} is not a chat session",
            hint="messages go to sessions made by `tilth chat`",
        )
    from tilth.web.api import NotAvailable

    raise NotAvailable("chat is not available in this version", hint="use `tilth chat`")
