"""Request bodies and plan replies, shared by the API modules (``api``, ``chat_api``)."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from tilth import RewindPlan
from tilth.errors import UsageError

MAX_BODY_BYTES = 2 << 20
"""The largest request body read (a chat message longer than this fits no model's context)."""


class BadRequest(UsageError):
    """The request body is not what the endpoint takes."""


class BodyTooLarge(BadRequest):
    """The request body is over ``MAX_BODY_BYTES`` (HTTP 413)."""


async def read_body(request: Request) -> dict[str, Any]:
    """The JSON object a request carries (``{}`` for none), read up to ``MAX_BODY_BYTES``."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise BodyTooLarge(
                f"the request body is over {MAX_BODY_BYTES >> 20} MiB",
                hint="send a shorter message",
            )
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # nesting past the parser's depth is not JSON either
        raise BadRequest("the request body is not JSON", hint="send a JSON object") from None
    if not isinstance(data, dict):
        raise BadRequest("the request body must be a JSON object")
    return data


def text_field(body: dict[str, Any], key: str, *, required: bool = True) -> str | None:
    value = body.get(key)
    if value is None or value == "":
        if required:
            raise BadRequest(f"{key!r} is required", hint=f'e.g. {{"{key}": "..."}}')
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{key!r} must be a string")
    return value


def flag_field(body: dict[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise BadRequest(f"{key!r} must be true or false")
    return value


def plan_json(plan: Any, **extra: Any) -> dict[str, Any]:
    """A plan as the API returns it: its data (``to_dict``) and its words (``render``)."""
    text = plan.render("the Undo button") if isinstance(plan, RewindPlan) else plan.render()
    return {"plan": plan.to_dict(), "text": text, **extra}
