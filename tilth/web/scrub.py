"""The secret filter on every response the web server sends (defence in depth: the
session files it reads are filtered when written, but a chat's live stream is not a file)."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tilth.secret_filter import scrub_bytes


class ScrubResponses:
    """ASGI middleware: every response body chunk passes through ``scrub_bytes``.

    The body's length may change, so ``content-length`` is dropped (the server then
    sends the body chunked).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return

        async def filtered(message: Message) -> None:
            if message.get("type") == "http.response.start":
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != b"content-length"
                ]
                message = {**message, "headers": headers}
            elif message.get("type") == "http.response.body" and message.get("body"):
                message = {**message, "body": scrub_bytes(bytes(message["body"]))}
            await send(message)

        await self.app(scope, receive, filtered)
