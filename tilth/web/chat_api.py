"""Chat sessions over HTTP: the transcript, and ``POST .../messages {text}`` with a streamed reply.

The web UI is a second front end on ``tilth.chat.ChatEngine``, the engine the terminal's
``tilth chat`` drives. One engine per chat session is opened in this server on first use
and closed when the server stops. A message runs the engine's turn in a worker thread;
its events (``turn_started``, ``text`` pieces, ``tool_started``/``tool_finished``,
``notice``, ``turn_finished``) are the response body, as Server-Sent Events. Going back
in a chat (rewind, undo) goes through the engine too, so its directory watcher takes the
restored files as the new baseline and a conversation rewind hands back the turn's prompt.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from tilth import Session
from tilth.chat import THREAD_KEY as CHAT_THREAD
from tilth.chat import transcript
from tilth.errors import TilthError, UsageError
from tilth.web import views
from tilth.web.bodies import BadRequest, plan_json, read_body
from tilth.web.json_response import JSONResponse
from tilth.web.markdown import to_tree
from tilth.web.scrub import DeltaScrubber
from tilth.web.state import ServerState, state_of

"""The chat's conversation thread (``tilth.chat.THREAD_KEY``)."""

if TYPE_CHECKING:
    from tilth.chat import ChatEngine


def _chat_session(request: Request) -> tuple[ServerState, Session]:
    state = state_of(request)
    session = views.open_session(state.settings, str(request.path_params["session_id"]))
    if views.session_kind(session.record().to_dict()) != "chat":
        raise UsageError(
            f"session {session.id} is not a chat session",
            hint="messages go to sessions made by `tilth chat`; a run is driven with resume",
        )
    return state, session


def history(session: Session, settings: Any) -> dict[str, Any]:
    """The transcript, the turns and the turns' model errors, read without opening an
    engine (a GET writes nothing).

    Messages have the shape of ``ChatEngine.history()``: ``{id, role, text, turn?, tools?,
    kind?}``; ``errors`` are ``{turn, error}``.
    """
    from tilth import TimelineController

    shown = transcript(session.threads.get(CHAT_THREAD))
    for message in shown:
        if message["role"] == "assistant" and message["text"]:
            message["markdown"] = to_tree(message["text"])
    found = TimelineController(session, settings).checkpoints().checkpoints
    chat_turns = [cp for cp in found if cp.kind == "turn" and cp.actor == "chat"]
    turns = [
        {
            "turn": number,
            "checkpoint": cp.id,
            "label": cp.label,
            "ts": cp.ts,
            "files_changed": cp.files_changed,
        }
        for number, cp in enumerate(chat_turns, 1)
    ]
    # A model error ends a turn without a reply; the event log keeps why (a rewind that
    # drops the turn drops its error with it).
    errors = [
        {"turn": event.payload.get("turn"), "error": str(event.payload.get("error") or "")}
        for event in session.events.events()
        if event.type == "chat_error"
    ]
    return {"messages": shown, "turns": turns, "errors": errors}


async def messages(request: Request) -> Response:
    state, session = _chat_session(request)
    if request.method == "GET":
        return JSONResponse(await run_in_threadpool(history, session, state.settings))
    # Checked before the chat is opened: a refused message never holds it.
    body = await read_body(request)
    text = body.get("text")
    if text is not None and not isinstance(text, str):
        raise BadRequest("'text' must be a string: the message to send", hint='{"text": "..."}')
    if not text or not text.strip():
        raise BadRequest("'text' is required: the message to send", hint='{"text": "..."}')
    return await _stream_turn(state, session, text)


async def _stream_turn(state: ServerState, session: Session, text: str) -> Response:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    def listener(event: Any) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, event.to_dict())

    def run() -> dict[str, Any]:
        try:
            # Only the request whose turn runs may point the engine's listener at itself.
            with state.chats.turn_held(session.id) as mine:
                if not mine:
                    raise UsageError("a turn is still running", hint="wait for it to finish")
                # The chat is held only while the turn runs: the terminal may take it after.
                with state.chats.borrowed(session) as engine:
                    cancel = state.chats.turn_started(session.id)  # the server's stop cancels it
                    engine.listener = listener
                    try:
                        result: dict[str, Any] = engine.send(text, cancel)
                    finally:
                        state.chats.turn_ended(session.id, cancel)
                        engine.listener = lambda event: None
                return result
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, None)

    turn = asyncio.ensure_future(run_in_threadpool(run))
    first = await queue.get()
    if first is None:
        await turn  # raises what refused the message (busy, locked, too long): a JSON error
        return JSONResponse({"error": "the message produced no reply", "hint": None}, 500)

    async def body() -> AsyncIterator[bytes]:
        item: dict[str, Any] | None = first
        deltas = DeltaScrubber()  # a key split across two deltas is still one key
        while item is not None:
            for shown in deltas.events(item):
                text = json.dumps(shown, ensure_ascii=False)  # a lone surrogate: its escape
                yield b"data: " + text.encode("utf-8", "backslashreplace") + b"\n\n"
            item = await queue.get()
        for shown in deltas.flush():
            yield b"data: " + json.dumps(shown).encode() + b"\n\n"
        try:
            result = await turn
            yield b"event: done\ndata: " + json.dumps(result).encode() + b"\n\n"
        except TilthError as exc:
            error = {"type": "error", "error": exc.message, "hint": exc.hint}
            yield b"data: " + json.dumps(error).encode() + b"\n\n"
        await state.watches.bump(session.events.path)

    return StreamingResponse(body(), media_type="text/event-stream")


# ---- going back in a chat (called by tilth.web.api for chat sessions) ------------------------
def chat_turn_of(engine: ChatEngine, checkpoint_id: str) -> int | None:
    """The turn number whose checkpoint is ``checkpoint_id`` (None: not a chat turn)."""
    for number, cp in enumerate(engine.turns(), 1):
        if cp.id == checkpoint_id:
            return number
    return None


def rewind(
    engine: ChatEngine, to: str, scope: str, *, dry_run: bool, force: bool
) -> dict[str, Any] | None:
    """A chat turn's rewind through the engine (None when ``to`` is not a chat turn)."""

    number = chat_turn_of(engine, engine.controller.resolve(to).id)
    if number is None:
        return None
    if dry_run:
        return plan_json(engine.plan_rewind(number, scope, force=force), dry_run=True)
    shown: list[Any] = []
    data = engine.rewind(number, scope, force=force, show=_keep(shown))
    return plan_json(shown[0], dry_run=False, done=True, prompt=data.get("prompt"), turn=number)


def undo(engine: ChatEngine, *, dry_run: bool) -> dict[str, Any]:
    """Undo the last go-back of a chat through its engine."""

    if dry_run:
        return plan_json(engine.plan_undo(), dry_run=True)
    shown: list[Any] = []
    engine.undo(show=_keep(shown))
    return plan_json(shown[0], dry_run=False, done=True)


def _keep(shown: list[Any]) -> Callable[[Any], bool]:
    """A ``show`` callback that keeps the plan (for the answer) and lets it run."""

    def show(plan: Any) -> bool:
        shown.append(plan)
        return True

    return show
