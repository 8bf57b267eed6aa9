"""A small Server-Sent Events reader for the tests (over httpx's streaming responses)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class Message:
    """One SSE message: ``event`` (``message`` by default), ``id`` and parsed ``data``."""

    event: str
    id: str | None
    data: Any


def messages(response: httpx.Response) -> Iterator[Message]:
    """Parse the stream as it arrives; comments (keep-alives) and ``retry`` are skipped."""
    event, ident, data = "message", None, []
    for line in response.iter_lines():
        if not line:
            if data:
                text = "\n".join(data)
                yield Message(event, ident, json.loads(text))
            event, ident, data = "message", None, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            event = value
        elif name == "id":
            ident = value
        elif name == "data":
            data.append(value)


def take(stream: Iterator[Message], count: int) -> list[Message]:
    """The next ``count`` messages (the stream's read timeout bounds the wait)."""
    return [next(stream) for _ in range(count)]
