"""The ASGI application of ``tilth serve``: routes, pages, error handling, the guard.

Pages are small HTML templates shipped in the package; the plain JavaScript
beside them fetches the JSON API and builds the DOM with ``textContent`` only,
so model-written text is always shown as text. Nothing is loaded from outside.
"""

from __future__ import annotations

import html
import logging
import re
import traceback
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from tilth.config import Settings
from tilth.errors import (
    GitError,
    SessionCorrupt,
    SessionLocked,
    SessionNotFound,
    SetupFailed,
    TilthError,
    UsageError,
)
from tilth.session import is_session_id
from tilth.web import api, attempts_api, chat_api
from tilth.web.bodies import BodyTooLarge
from tilth.web.json_response import JSONResponse
from tilth.web.runs import Runs
from tilth.web.scrub import ScrubResponses
from tilth.web.security import Guard
from tilth.web.state import ServerState, state_of

if TYPE_CHECKING:
    from tilth import Model

HERE = Path(__file__).resolve().parent
log = logging.getLogger("tilth.serve")


def status_for(exc: TilthError) -> int:
    """The HTTP status of a library error."""
    if isinstance(exc, SessionNotFound):
        return 404
    if isinstance(exc, SessionLocked):
        return 409
    if isinstance(exc, BodyTooLarge):
        return 413
    if isinstance(exc, UsageError):
        return 400
    if isinstance(exc, SessionCorrupt | GitError):
        return 500
    return 409


_FLAG = re.compile(r"(?<![\w-])--(from|to|direction|scope|at|task)(?![\w-])")


def api_words(text: str | None) -> str | None:
    """A library message in the API's words: a command-line flag becomes its JSON field
    (``valid --from stages`` → ``valid "from" stages``); a quoted command stays as written."""
    if not text:
        return text
    text = text.replace("reset --to-seed", "reset-to-seed")  # the endpoint's name
    parts = text.split("`")
    return "`".join(p if i % 2 else _FLAG.sub(r'"\1"', p) for i, p in enumerate(parts))


def error_json(status: int, message: str, hint: str | None = None) -> JSONResponse:
    return JSONResponse({"error": api_words(message), "hint": api_words(hint)}, status_code=status)


async def on_tilth_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, TilthError)
    answer = error_json(status_for(exc), exc.message, exc.hint)
    if isinstance(exc, SetupFailed):  # as the CLI shows it: the command's own words
        answer = JSONResponse(
            {"error": exc.message, "hint": exc.hint, "output": exc.output},
            status_code=answer.status_code,
        )
    return answer


async def on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    messages = {404: "not found", 405: "method not allowed"}
    hints = {
        404: "GET /api/sessions lists the sessions; docs/serve.md lists the endpoints",
        405: "state-changing endpoints take POST; reads take GET",
    }
    message = messages.get(exc.status_code, str(exc.detail))
    headers = dict(exc.headers or {})
    return JSONResponse(
        {"error": message, "hint": hints.get(exc.status_code)},
        status_code=exc.status_code,
        headers=headers,
    )


async def on_unexpected(request: Request, exc: Exception) -> Response:
    # The server boundary: log the traceback on the server, never send it.
    log.error(
        "unexpected error on %s %s\n%s",
        request.method,
        request.url.path,
        "".join(traceback.format_exception(exc)),
    )
    return error_json(
        500, f"unexpected {type(exc).__name__}", "the server's output has the details"
    )


class Pages:
    """The HTML templates, read once; the token goes into a ``<meta>`` for the scripts."""

    def __init__(self) -> None:
        self._templates = {
            p.stem: p.read_text(encoding="utf-8") for p in (HERE / "templates").glob("*.html")
        }

    def render(self, name: str, token: str, title: str) -> HTMLResponse:
        text = self._templates[name]
        text = text.replace("{{token}}", html.escape(token, quote=True))
        text = text.replace("{{title}}", html.escape(title, quote=True))
        return HTMLResponse(text)


async def index_page(request: Request) -> Response:
    state = state_of(request)
    pages: Pages = request.app.state.pages
    return pages.render("index", state.token, "tilth · sessions")


async def session_page(request: Request) -> Response:
    state = state_of(request)
    pages: Pages = request.app.state.pages
    sid = str(request.path_params["session_id"])
    exists = is_session_id(sid) and (state.settings.sessions_dir / sid).is_dir()
    if not exists:
        return HTMLResponse(
            f"<!doctype html><title>not found</title><p>No session {html.escape(sid)}. "
            '<a href="/">All sessions</a></p>',
            status_code=404,
        )
    return pages.render("session", state.token, f"tilth · {sid}")


def create_app(
    settings: Settings, token: str, port: int, *, chat_model: Callable[[], Model] | None = None
) -> Guard:
    """The whole server as one ASGI app (``port`` names the token cookie).

    ``chat_model`` makes the model a chat session talks to (default: the worker role's
    configured endpoint); tests and the demo pass a scripted one.
    """
    state = ServerState(
        settings=settings, token=token, port=port, runs=Runs(settings.home), chat_model=chat_model
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await state.watches.close()
            await run_in_threadpool(state.runs.shutdown)
            await run_in_threadpool(state.chats.close)

    sid = "/api/sessions/{session_id}"
    routes = [
        Route("/", index_page),
        Route("/s/{session_id}", session_page),
        Route("/api/sessions", api.list_sessions),
        Route(sid, api.get_session),
        Route(f"{sid}/checkpoints", api.get_checkpoints),
        Route(f"{sid}/events", api.get_events),
        Route(f"{sid}/rewind", api.rewind, methods=["POST"]),
        Route(f"{sid}/restart", api.restart, methods=["POST"]),
        Route(f"{sid}/reset-to-seed", api.reset_to_seed, methods=["POST"]),
        Route(f"{sid}/fork", api.fork, methods=["POST"]),
        Route(f"{sid}/undo", api.undo, methods=["POST"]),
        Route(f"{sid}/attempts/pick", attempts_api.pick, methods=["POST"]),
        Route(f"{sid}/resume", api.resume, methods=["POST"]),
        Route(f"{sid}/stop", api.stop, methods=["POST"]),
        Route(f"{sid}/messages", chat_api.messages, methods=["GET", "POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            TilthError: on_tilth_error,
            HTTPException: on_http_error,
            Exception: on_unexpected,
        },
    )
    app.state.tilth = state
    app.state.pages = Pages()
    return Guard(ScrubResponses(app), token, lambda: state.port, state)
