"""Reading what an endpoint answered when it did not simply answer: statuses, bodies, causes.

Pure functions over what ``tilth.model.http_chat`` hands back: which statuses a retry may
fix, the one-line reason of a refusal (from the body's message), a refusal for the context
window's sake (as llama.cpp, OpenAI and vLLM each say it), ``Retry-After`` (seconds or a
date), a provider's ``{"error": ...}`` sent with a 200, and the innermost cause of a lost
connection.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any

from tilth.model.http_chat import StatusFailure

_REASON_CHARS = 300
_ERRNO_PREFIX = re.compile(r"^\[Errno -?\d+\]\s*")
_OVERFLOW_WORDS = re.compile(
    r"context (?:size|length|window)|maximum context|too many tokens|prompt is too long",
    re.IGNORECASE,
)
_LLAMA_OVERFLOW = re.compile(r"\((\d+) tokens\) exceeds the available context size \((\d+)")


def is_retryable_status(status: int) -> bool:
    """Rate limits and server errors may pass; other client errors will not."""
    return status == 429 or status >= 500


def status_reason(failure: StatusFailure) -> str:
    """``HTTP <status>: <message>``, the message from the body (``error.message``,
    ``message``, a string ``error``) or else the status's own phrase."""
    body = failure.body
    found = body.get("error", body) if isinstance(body, dict) else None
    detail: Any = None
    if isinstance(found, dict):
        detail = found.get("message") or found.get("error")
        if isinstance(detail, dict):
            detail = detail.get("message")
    elif isinstance(found, str):
        detail = found
    if not detail:
        detail = failure.reason_phrase or failure.text or "no reason given"
    return f"HTTP {failure.status}: {one_line(str(detail))}"


def refuses_streaming(status: int, reason: str) -> bool:
    """True for a client error that complains about ``stream`` (the endpoint cannot stream)."""
    return status in (400, 405, 415, 422, 501) and "stream" in reason.lower()


def context_overflow(status: int, body: Any, reason: str) -> tuple[int | None, int | None] | None:
    """``(prompt tokens, window)`` when a refusal is about the context window, else None.

    llama.cpp answers ``exceed_context_size_error`` with ``n_prompt_tokens`` and ``n_ctx``;
    OpenAI says ``context_length_exceeded``; vLLM and others say it in words.
    """
    if status not in (400, 413, 422):
        return None
    error = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(error, dict):
        error = {}
    kinds = {str(error.get("type") or ""), str(error.get("code") or "")}
    if not kinds & {"exceed_context_size_error", "context_length_exceeded"} and not (
        _OVERFLOW_WORDS.search(reason)
    ):
        return None
    prompt, window = error.get("n_prompt_tokens"), error.get("n_ctx")
    found = _LLAMA_OVERFLOW.search(reason)
    if found and not isinstance(prompt, int):
        prompt, window = int(found.group(1)), int(found.group(2))
    return (
        prompt if isinstance(prompt, int) else None,
        window if isinstance(window, int) else None,
    )


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after``: a number of seconds, or an HTTP
    date (seconds from ``now``, a ``time.time()`` instant, to it; 0 once it passed)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            seconds = float(raw) * scale
        except ValueError:
            until = _seconds_until(raw, time.time() if now is None else now)
            if until is None or name != "retry-after":
                continue
            seconds = until
        if 0 <= seconds < float("inf"):
            return seconds
    return None


def _seconds_until(http_date: str, now: float) -> float | None:
    try:
        when = parsedate_to_datetime(http_date.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" or no zone: HTTP dates are GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


def parsed_body(body: bytes) -> Any:
    """A whole answer's JSON, or its text when it is not JSON (a web page, an empty body)."""
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return body.decode("utf-8", "replace")


def provider_error(response: Any) -> str | None:
    """The message of an ``{"error": ...}`` object sent with HTTP 200, if any."""
    found = response.get("error") if isinstance(response, dict) else None
    return error_text(found) if found else None


def error_text(found: Any) -> str:
    if isinstance(found, dict):
        found = found.get("message") or json.dumps(found)
    return one_line(str(found))


def one_line(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > _REASON_CHARS:
        return text[: _REASON_CHARS - 1] + "…"
    return text


def connection_reason(exc: BaseException) -> str:
    """The innermost cause of a connection failure, e.g. "connection refused"."""
    deepest: BaseException = exc
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        deepest = current
        current = current.__cause__ or current.__context__
    text = _ERRNO_PREFIX.sub("", one_line(str(deepest))) or "connection failed"
    return text[0].lower() + text[1:]
