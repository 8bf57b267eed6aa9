"""``OpenAIModel``: any OpenAI-compatible Chat Completions endpoint, with bounded retries.

The HTTP is our own (``tilth.model.http_chat``, over httpx; no SDK). Every retry is
visible: ``on_retry(attempt, reason, delay)`` runs before each one, and the turn loop logs
it. 429, 5xx, timeouts and connection failures are retried with exponential backoff and
jitter, except a server error (500, not a busy 502-504) the same request already drew (the
server fails on that request, not by chance); any other error fails at once, a refusal for
the context window's sake as ``ContextOverflow``. Every request carries ``max_tokens``.
Messages never carry the API key.

Replies are streamed (``stream: true`` with usage included) and reassembled by
``tilth.model.stream``; ``on_delta`` sees each piece as it arrives. The timeout bounds the
wait for the first byte, between two chunks and for content (keep-alives do not count), so a
stalled stream is a retryable failure.
An endpoint that refuses streaming is called without it from then on
(``on_stream_refused`` is told once). A provider's ``{"error": ...}`` inside the stream, or
in a 200 body, is retried like a server error.
"""

from __future__ import annotations

import json
import math
import random
import time
import weakref
from collections.abc import Callable
from typing import Any

import httpx

from tilth.config import Endpoint
from tilth.errors import ContextOverflow, ModelError
from tilth.model.answers import (
    connection_reason,
    context_overflow,
    error_text,
    is_retryable_status,
    one_line,
    parsed_body,
    provider_error,
    refuses_streaming,
    retry_after,
    status_reason,
)
from tilth.model.base import AssistantTurn, OnDelta, RetryHook
from tilth.model.http_chat import (
    ChatHTTP,
    StatusFailure,
    StreamStalled,
    TrustUnreadable,
    UnreadableStream,
)
from tilth.model.stream import CHARS_PER_TOKEN, StreamAssembler, turn_from_completion
from tilth.secret_filter import scrub_value

__all__ = ["OpenAIModel", "RetryHook"]
StreamRefusedHook = Callable[[str], None]

MAX_BACKOFF_SECONDS = 60.0
_REMEMBERED_ANSWERS = 32
DEFAULT_REPLY_TOKENS = 8192
"""``max_tokens`` when none is given (``TILTH_MAX_REPLY_TOKENS``'s default)."""
_BUSY = (502, 503, 504)
"""Server errors that say the server is busy or away, never that the request is at fault."""


def backoff_delay(
    attempt: int, base_seconds: float, rand: Callable[[], float] = random.random
) -> float:
    """Seconds to wait before retry ``attempt`` (1-based): doubling, capped, half of it jittered."""
    ceiling = min(MAX_BACKOFF_SECONDS, base_seconds * 2 ** (attempt - 1))
    return ceiling / 2 + rand() * ceiling / 2


def retry_wait(attempt: int, base_seconds: float, told: float | None) -> float:
    """Seconds before retry ``attempt``: the backoff, or what the server's ``Retry-After``
    asked when longer (waiting less would only earn another 429), capped at
    ``MAX_BACKOFF_SECONDS`` (a server asking for an hour is not waited for in silence)."""
    wait = backoff_delay(attempt, base_seconds)
    if told is not None:
        wait = max(wait, min(told, MAX_BACKOFF_SECONDS))
    return wait


class OpenAIModel:
    """Calls one role's endpoint (Chat Completions over HTTP, one connection pool each)."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        max_retries: int = 4,
        backoff_seconds: float = 1.0,
        timeout_seconds: float = 300.0,
        on_retry: RetryHook | None = None,
        request_reasoning: bool | None = None,
        stream: bool = True,
        on_stream_refused: StreamRefusedHook | None = None,
        max_reply_tokens: int | None = DEFAULT_REPLY_TOKENS,
        context_tokens: int | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.max_reply_tokens = max_reply_tokens
        """``max_tokens`` sent with every request (None: the endpoint's own limit)."""
        self.context_tokens = context_tokens
        """The window to assume when the endpoint does not say (``TILTH_CONTEXT_TOKENS``)."""
        self._answers: dict[str, str] = {}
        """Server errors by request fingerprint: the same request drawing the same answer
        again is not retried."""
        self.max_retries = max(0, max_retries)
        self.backoff_seconds = backoff_seconds
        self.timeout_seconds = timeout_seconds
        self.on_retry = on_retry
        self.stream = stream
        """False from the start, or once the endpoint refused a streamed request."""
        self.on_stream_refused = on_stream_refused
        # None: decide from the endpoint (OpenRouter needs the opt-in to return reasoning).
        self.request_reasoning = (
            endpoint.is_openrouter if request_reasoning is None else request_reasoning
        )
        self._http = ChatHTTP(endpoint.base_url, endpoint.api_key, timeout_seconds)
        # Dropping the model closes its connections (``close`` does it at once).
        self._closer = weakref.finalize(self, self._http.close)

    def close(self) -> None:
        """Close the model's open connections (a later request opens new ones)."""
        self._http.close()

    @property
    def name(self) -> str:
        return self.endpoint.model

    def request_options(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The JSON body of a request (``stream`` and its options are added per call)."""
        # The secret filter: no key Tilth knows goes to a model, whatever a file held.
        options: dict[str, Any] = {"model": self.endpoint.model, "messages": scrub_value(messages)}
        if tools:
            options["tools"] = tools
        if self.max_reply_tokens:
            options["max_tokens"] = self.max_reply_tokens
        if self.request_reasoning:
            options["reasoning"] = {"enabled": True}
        return options

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        on_delta: OnDelta | None = None,
        on_retry: RetryHook | None = None,
    ) -> AssistantTurn:
        """One assistant turn, retrying transient failures; raises ``ModelError``.

        After a retry, ``on_delta`` hears the new reply from its beginning. ``on_retry``
        (else the model's own hook) is told before each retry.
        """
        options = self.request_options(messages, tools)
        fingerprint = _fingerprint(options)
        hook = on_retry or self.on_retry
        attempts = self.max_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                return self._call_once(options, on_delta)
            except _Transient as transient:
                repeated = self._seen_before(fingerprint, transient)
                if attempt == attempts or repeated:
                    plural = "attempt" if attempt == 1 else "attempts"
                    message = f"{transient.failure} (after {attempt} {plural})"
                    if repeated:
                        message += "; the same request drew the same answer, so it was not retried"
                    raise self._error(message, self._final_hint(transient)) from None
                wait = retry_wait(attempt, self.backoff_seconds, transient.retry_after)
                if hook is not None:
                    hook(attempt, self._scrub(transient.reason), wait)
                time.sleep(wait)
        raise AssertionError("unreachable: the loop returns or raises")

    def context_window(self) -> int | None:
        """The endpoint's window for this model (``/props``, ``/models``), else the setting."""
        from tilth.model.endpoint_facts import cached_window

        return cached_window(self.endpoint) or self.context_tokens

    def takes_tools(self) -> bool | None:
        """Whether the endpoint's chat template takes tools (llama.cpp's ``/props``; None:
        it does not say)."""
        from tilth.model.endpoint_facts import cached_facts

        return cached_facts(self.endpoint).supports_tools

    def _seen_before(self, fingerprint: str, transient: _Transient) -> bool:
        """True when this request drew this server error before (remembered otherwise)."""
        if transient.status is None or transient.status < 500 or transient.status in _BUSY:
            return False  # lost connections, timeouts, rate limits and a busy server do pass
        if self._answers.get(fingerprint) == transient.reason:
            return True
        self._answers[fingerprint] = transient.reason
        while len(self._answers) > _REMEMBERED_ANSWERS:
            self._answers.pop(next(iter(self._answers)))
        return False

    def _final_hint(self, transient: _Transient) -> str | None:
        """What to do after the last attempt; a server error is no reason to doubt the URL."""
        if transient.status is not None and transient.status >= 500:
            return (
                f"the {self.endpoint.role} model's server failed on this request; its log says "
                "why (a full context or a malformed history are common causes)"
            )
        if transient.status == 429:
            return "the endpoint is rate-limiting; wait, or raise TILTH_MODEL_BACKOFF_SECONDS"
        if transient.timed_out:
            return (
                "the server is slow or stalled; TILTH_MODEL_TIMEOUT_SECONDS sets the wait, "
                "TILTH_MODEL_MAX_RETRIES the retries"
            )
        return self._status_hint(None)

    def _call_once(self, options: dict[str, Any], on_delta: OnDelta | None) -> AssistantTurn:
        """One request, streamed unless the endpoint refused streaming before."""
        if self.stream:
            try:
                return self._guarded(lambda: self._streamed(options, on_delta))
            except _StreamRefused as refused:
                self.stream = False
                if self.on_stream_refused is not None:
                    self.on_stream_refused(self._scrub(refused.reason))
        return self._guarded(lambda: self._plain(options))

    def _streamed(self, options: dict[str, Any], on_delta: OnDelta | None) -> AssistantTurn:
        assembler = StreamAssembler(on_delta)
        body = {**options, "stream": True, "stream_options": {"include_usage": True}}
        ended = self._http.stream(body, assembler.add)
        if isinstance(ended, bytes):
            # The endpoint ignored ``stream`` and answered in one piece (or sent a page).
            return self._unstreamed_answer(ended)
        if assembler.error is not None:
            reason = f"provider error: {error_text(assembler.error)}"
            raise _Transient(reason, f"could not get an answer from the {self._where}: {reason}")
        if not ended and not assembler.finished:
            # A body that simply stops (read until the connection closes) says nothing of why:
            # without [DONE] or a finish_reason it is a lost connection, never a whole reply
            # (and never a reason to stop streaming for the rest of the run).
            where = "mid-reply" if assembler.chunks else "before its first event"
            reason = f"the stream ended {where}, without a finish_reason or [DONE]"
            raise _Transient(reason, f"could not get an answer from the {self._where}: {reason}")
        if assembler.chunks == 0:
            # An event stream with no events: ask again without streaming.
            raise _StreamRefused("the endpoint answered a streamed request with no events")
        prompt_chars = len(json.dumps(options.get("messages") or [], ensure_ascii=False))
        return assembler.turn(prompt_estimate=math.ceil(prompt_chars / CHARS_PER_TOKEN))

    def _unstreamed_answer(self, body: bytes) -> AssistantTurn:
        """A streamed request answered with a whole body: read it as a plain reply."""
        data = parsed_body(body)
        if isinstance(data, dict) and isinstance(data.get("choices"), list) and data["choices"]:
            if self.stream:
                # A real completion: this endpoint does not stream, so stop asking it to.
                self.stream = False
                if self.on_stream_refused is not None:
                    self.on_stream_refused("the endpoint answered a streamed request in one piece")
        return self._from_completion(data)

    def _plain(self, options: dict[str, Any]) -> AssistantTurn:
        return self._from_completion(parsed_body(self._http.post(options)))

    def _from_completion(self, response: Any) -> AssistantTurn:
        if not isinstance(response, dict) or response.get("choices") is None:
            upstream = provider_error(response)
            if upstream is not None:
                # OpenRouter reports upstream failures in a 200 body; they are usually transient.
                reason = f"provider error: {upstream}"
                raise _Transient(
                    reason, f"could not get an answer from the {self._where}: {reason}"
                )
            shown = one_line(str(response))[:80]
            message = f"unreadable reply from the {self._where}: not a chat completion ({shown})"
            raise self._error(message, f"check that {self._variable('BASE_URL')} is the API root")
        return turn_from_completion(response)

    def _guarded(self, call: Callable[[], AssistantTurn]) -> AssistantTurn:
        """Run one request; ``_Transient`` for what a retry may fix, ``ModelError`` for the rest."""
        try:
            return call()
        except StatusFailure as exc:
            reason = status_reason(exc)
            if self.stream and refuses_streaming(exc.status, reason):
                raise _StreamRefused(reason) from None
            if is_retryable_status(exc.status):
                failure = f"could not get an answer from the {self._where}: {reason}"
                raise _Transient(
                    reason, failure, retry_after(exc.headers), status=exc.status
                ) from None
            message = f"the {self._where} refused the request: {reason}"
            overflow = context_overflow(exc.status, exc.body, reason)
            if overflow is not None:
                raise ContextOverflow(
                    self._scrub(message),
                    hint="summarize the conversation (/summarize in chat, `tilth summarize`) "
                    "or give the model a larger context",
                    prompt_tokens=overflow[0],
                    window=overflow[1],
                ) from None
            raise self._error(message, self._status_hint(exc.status)) from None
        except (httpx.TimeoutException, StreamStalled) as exc:
            reason = f"no answer within {self.timeout_seconds:g}s"
            if isinstance(exc, StreamStalled):
                reason = str(exc)
            raise _Transient(
                reason, f"could not reach the {self._where}: {reason}", timed_out=True
            ) from None
        except httpx.TransportError as exc:
            # Refused, reset or cut off (mid-stream too), a proxy or TLS failure.
            reason = connection_reason(exc)
            raise _Transient(reason, f"could not reach the {self._where}: {reason}") from None
        except (UnreadableStream, httpx.HTTPError) as exc:
            detail = one_line(str(exc)) or type(exc).__name__
            raise self._error(f"unreadable reply from the {self._where}: {detail}") from None
        except (httpx.InvalidURL, UnicodeEncodeError) as exc:
            # A URL httpx cannot parse, a key that cannot be a header (a stray non-ASCII letter).
            detail = one_line(str(exc)) or type(exc).__name__
            hint = f"check {self._variable('BASE_URL')} and {self._variable('API_KEY')}"
            message = f"cannot send a request to the {self._where}: {detail}"
            raise self._error(message, hint) from None
        except TrustUnreadable as exc:
            message = f"cannot send a request to the {self._where}: {exc}"
            raise self._error(message, "check SSL_CERT_FILE and SSL_CERT_DIR") from None

    @property
    def _where(self) -> str:
        return f"{self.endpoint.role} model at {self.endpoint.base_url}"

    def _status_hint(self, status: int | None) -> str | None:
        if status in (401, 403):
            return f"check {self._variable('API_KEY')}"
        if status == 404:
            return f"check {self._variable('BASE_URL')} and the {self.endpoint.role} model name"
        if status is None:
            return f"check {self._variable('BASE_URL')}; TILTH_MODEL_MAX_RETRIES sets the retries"
        return None

    def _variable(self, suffix: str) -> str:
        """The setting behind ``suffix`` for this role (other roles fall back to the worker's)."""
        if self.endpoint.role == "worker":
            return f"TILTH_{suffix}"
        return f"TILTH_{self.endpoint.role.upper()}_{suffix} (or TILTH_{suffix})"

    def _error(self, message: str, hint: str | None = None) -> ModelError:
        return ModelError(self._scrub(message), hint=hint)

    def _scrub(self, text: str) -> str:
        key = self.endpoint.api_key
        return text.replace(key, "***") if key else text


class _StreamRefused(Exception):
    """The endpoint will not stream; ``reason`` says what it answered."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Transient(Exception):
    """A failure a retry may fix: ``reason`` for the retry event, ``failure`` for the last error."""

    def __init__(
        self,
        reason: str,
        failure: str,
        retry_after: float | None = None,
        *,
        status: int | None = None,
        timed_out: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.failure = failure
        self.retry_after = retry_after
        self.status = status
        self.timed_out = timed_out


def _fingerprint(options: dict[str, Any]) -> str:
    import hashlib

    text = json.dumps(options, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
