"""The secret filter on every response the web server sends (defence in depth: the
session files it reads are filtered when written, but a chat's live stream is not a file)."""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tilth.secret_filter import ByteStreamScrubber, StreamScrubber

STREAMED_KINDS = ("text", "reasoning")
"""Chat events whose ``text`` is one piece of a reply streamed delta by delta."""


class ScrubResponses:
    """ASGI middleware: every response body passes through the secret filter as a stream.

    A streamed body comes in chunks, and a key may be split across two of them: the
    filter holds back a chunk's end while it could begin a key, and sends it with the
    next chunk (or at the end of the body). The body's length may change, so
    ``content-length`` is dropped (the server then sends the body chunked).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        scrubber = ByteStreamScrubber()

        async def filtered(message: Message) -> None:
            if message.get("type") == "http.response.start":
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != b"content-length"
                ]
                message = {**message, "headers": headers}
            elif message.get("type") == "http.response.body":
                body = scrubber.feed(bytes(message.get("body") or b""))
                if not message.get("more_body", False):
                    body += scrubber.flush()
                message = {**message, "body": body}
            await send(message)

        await self.app(scope, receive, filtered)


class DeltaScrubber:
    """The secret filter across a chat turn's streamed events.

    A reply arrives as many ``text`` (and ``reasoning``) events that the page joins, so a
    key split between two of them would pass a filter that looks at one event at a time:
    each kind's pieces go through one ``StreamScrubber``, and what it holds back is sent
    before the next event of another kind (or at the end of the turn).
    """

    def __init__(self) -> None:
        self.streams: dict[str, StreamScrubber] = {}

    def events(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        """What to send for ``item``: itself filtered, after any text held back before it."""
        kind = item.get("type")
        if isinstance(kind, str) and kind in STREAMED_KINDS and isinstance(item.get("text"), str):
            stream = self.streams.setdefault(kind, StreamScrubber())
            return [{**item, "text": stream.feed(item["text"])}]
        return [*self.flush(), item]

    def flush(self) -> list[dict[str, Any]]:
        """The text held back, as one event per kind (none when nothing was held)."""
        out = []
        for kind, stream in self.streams.items():
            held = stream.flush()
            if held:
                out.append({"type": kind, "text": held})
        return out
