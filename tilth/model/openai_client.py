"""``OpenAIModel``: any OpenAI-compatible Chat Completions endpoint, with our own bounded retries.

The SDK's own retries are off so that every retry is visible: ``on_retry(attempt, reason, delay)``
runs before each one, and the turn loop logs it. 429, 5xx, timeouts and connection failures are
retried with exponential backoff and jitter, except a server error (500, not a busy 502-504)
the same request already drew (the server fails on that request, not by chance); any other
error fails at once, a refusal for the context window's sake as ``ContextOverflow``. Every
request carries ``max_tokens``. Messages never carry the API key.

Replies are streamed (``stream=True`` with usage included) and reassembled by
``tilth.model.stream``; ``on_delta`` sees each piece as it arrives. The timeout bounds the wait
for the first byte and between two chunks, so a stalled stream is a retryable failure. An
endpoint that refuses streaming is called without it from then on (``on_stream_refused`` is
told once).
"""

from __future__ import annotations

import importlib
import json
import math
import os
import random
import re
import ssl
import time
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

import openai

from tilth.config import Endpoint
from tilth.errors import ContextOverflow, ModelError
from tilth.model.base import AssistantTurn, OnDelta, RetryHook, ToolCall, Usage
from tilth.model.stream import CHARS_PER_TOKEN, StreamAssembler
from tilth.secret_filter import scrub_value

__all__ = ["OpenAIModel", "RetryHook"]
StreamRefusedHook = Callable[[str], None]

MAX_BACKOFF_SECONDS = 60.0
_REASON_CHARS = 300
_ERRNO_PREFIX = re.compile(r"^\[Errno -?\d+\]\s*")
_OVERFLOW_WORDS = re.compile(
    r"context (?:size|length|window)|maximum context|too many tokens|prompt is too long",
    re.IGNORECASE,
)
_LLAMA_OVERFLOW = re.compile(r"\((\d+) tokens\) exceeds the available context size \((\d+)")
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


def _shared_http_client() -> Any:
    """An SDK HTTP client using this process's shared TLS context (None: the SDK's own)."""
    context = _tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    return None if context is None else openai.DefaultHttpxClient(verify=context)


@cache
def _tls_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext | None:
    """The certificate-verifying TLS context every client of this process shares.

    Reading the trusted certificates costs about 30 ms, and each client would read them
    again (a run makes one per role, a server one per run it drives). Made by the HTTP
    library the SDK's client is built on (httpx, or httpx2 in newer SDKs), so the trust
    is the SDK's; the arguments are the settings it reads, so changing them makes another.
    """
    try:
        client = next(c for c in openai.DefaultHttpxClient.__mro__[1:] if c.__name__ == "Client")
        library = importlib.import_module(client.__module__.split(".")[0])
        made = library.create_ssl_context()
    except (StopIteration, ImportError, AttributeError, TypeError):
        return None
    return made if isinstance(made, ssl.SSLContext) else None


def is_retryable_status(status: int) -> bool:
    """Rate limits and server errors may pass; other client errors will not."""
    return status == 429 or status >= 500


class OpenAIModel:
    """Calls one role's endpoint through the official ``openai`` SDK."""

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
        self._client = openai.OpenAI(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key,
            max_retries=0,
            timeout=timeout_seconds,
            http_client=_shared_http_client(),
        )

    @property
    def name(self) -> str:
        return self.endpoint.model

    def request_options(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The keyword arguments for ``chat.completions.create``."""
        # The secret filter: no key Tilth knows goes to a model, whatever a file held.
        options: dict[str, Any] = {"model": self.endpoint.model, "messages": scrub_value(messages)}
        if tools:
            options["tools"] = tools
        if self.max_reply_tokens:
            options["max_tokens"] = self.max_reply_tokens
        if self.request_reasoning:
            options["extra_body"] = {"reasoning": {"enabled": True}}
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
                wait = backoff_delay(attempt, self.backoff_seconds)
                if transient.retry_after is not None:
                    # The server said how long; waiting less would only earn another 429.
                    wait = max(wait, min(transient.retry_after, MAX_BACKOFF_SECONDS))
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
        chunks: Any = self._client.chat.completions.create(
            **options, stream=True, stream_options={"include_usage": True}
        )
        try:
            content_type = str(chunks.response.headers.get("content-type") or "")
            if "event-stream" not in content_type:
                # The endpoint ignored ``stream`` and answered in one piece (or sent a page).
                return self._unstreamed_answer(chunks.response.read())
            for chunk in chunks:
                assembler.add(chunk)
        finally:
            chunks.close()
        if assembler.error is not None:
            reason = f"provider error: {_error_text(assembler.error)}"
            raise _Transient(reason, f"could not get an answer from the {self._where}: {reason}")
        if assembler.chunks == 0:
            # Not an event stream at all (a JSON body, an empty 200): ask again without streaming.
            raise _StreamRefused("the endpoint answered a streamed request with no events")
        prompt_chars = len(json.dumps(options.get("messages") or [], ensure_ascii=False))
        return assembler.turn(prompt_estimate=math.ceil(prompt_chars / CHARS_PER_TOKEN))

    def _unstreamed_answer(self, body: bytes) -> AssistantTurn:
        """A streamed request answered with a whole body: read it as a plain reply."""
        from openai.types.chat import ChatCompletion

        try:
            data = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            return self._from_completion(body.decode("utf-8", "replace"))
        if not isinstance(data, dict):
            return self._from_completion(data)
        if isinstance(data.get("choices"), list) and data["choices"] and self.stream:
            # A real completion: this endpoint does not stream, so stop asking it to.
            self.stream = False
            if self.on_stream_refused is not None:
                self.on_stream_refused("the endpoint answered a streamed request in one piece")
        return self._from_completion(ChatCompletion.construct(**data))

    def _plain(self, options: dict[str, Any]) -> AssistantTurn:
        return self._from_completion(self._client.chat.completions.create(**options))

    def _from_completion(self, response: Any) -> AssistantTurn:
        if getattr(response, "choices", None) is None:
            provider_error = _provider_error(response)
            if provider_error is not None:
                # OpenRouter reports upstream failures in a 200 body; they are usually transient.
                reason = f"provider error: {provider_error}"
                raise _Transient(
                    reason, f"could not get an answer from the {self._where}: {reason}"
                )
            shown = _one_line(str(response))[:80]
            message = f"unreadable reply from the {self._where}: not a chat completion ({shown})"
            raise self._error(message, f"check that {self._variable('BASE_URL')} is the API root")
        return turn_from_response(response)

    def _guarded(self, call: Callable[[], AssistantTurn]) -> AssistantTurn:
        """Run one request; ``_Transient`` for what a retry may fix, ``ModelError`` for the rest."""
        try:
            return call()
        except openai.APIStatusError as exc:
            reason = self._status_reason(exc)
            if self.stream and refuses_streaming(exc.status_code, reason):
                raise _StreamRefused(reason) from None
            if is_retryable_status(exc.status_code):
                failure = f"could not get an answer from the {self._where}: {reason}"
                raise _Transient(
                    reason, failure, retry_after(exc.response.headers), status=exc.status_code
                ) from None
            message = f"the {self._where} refused the request: {reason}"
            overflow = context_overflow(exc.status_code, exc.body, reason)
            if overflow is not None:
                raise ContextOverflow(
                    self._scrub(message),
                    hint="summarize the conversation (/summarize in chat, `tilth summarize`) "
                    "or give the model a larger context",
                    prompt_tokens=overflow[0],
                    window=overflow[1],
                ) from None
            raise self._error(message, self._status_hint(exc.status_code)) from None
        except openai.APITimeoutError:
            reason = f"no answer within {self.timeout_seconds:g}s"
            raise _Transient(
                reason, f"could not reach the {self._where}: {reason}", timed_out=True
            ) from None
        except openai.APIConnectionError as exc:
            reason = _connection_reason(exc)
            raise _Transient(reason, f"could not reach the {self._where}: {reason}") from None
        except openai.APIError as exc:
            detail = _one_line(str(exc)) or type(exc).__name__
            raise self._error(f"unreadable reply from the {self._where}: {detail}") from None

    @property
    def _where(self) -> str:
        return f"{self.endpoint.role} model at {self.endpoint.base_url}"

    def _status_reason(self, exc: openai.APIStatusError) -> str:
        body = exc.body
        detail: Any = None
        if isinstance(body, dict):
            detail = body.get("message") or body.get("error")
            if isinstance(detail, dict):
                detail = detail.get("message")
        if not detail:
            detail = exc.response.reason_phrase or exc.message
        return f"HTTP {exc.status_code}: {_one_line(str(detail))}"

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


def refuses_streaming(status: int, reason: str) -> bool:
    """True for a client error that complains about ``stream`` (the endpoint cannot stream)."""
    return status in (400, 405, 415, 422, 501) and "stream" in reason.lower()


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


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (the HTTP-date form is ignored)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            seconds = float(raw) * scale
        except ValueError:
            continue
        if 0 <= seconds < float("inf"):
            return seconds
    return None


def _provider_error(response: Any) -> str | None:
    """The message of an ``{"error": ...}`` object sent with HTTP 200, if any."""
    extras = getattr(response, "model_extra", None) or {}
    found = extras.get("error")
    if isinstance(found, dict):
        found = found.get("message") or json.dumps(found)
    return _one_line(str(found)) if found else None


def _error_text(found: Any) -> str:
    if isinstance(found, dict):
        found = found.get("message") or json.dumps(found)
    return _one_line(str(found))


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > _REASON_CHARS:
        return text[: _REASON_CHARS - 1] + "…"
    return text


def _connection_reason(exc: BaseException) -> str:
    """The innermost cause of a connection failure, e.g. "connection refused"."""
    deepest: BaseException = exc
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        deepest = current
        current = current.__cause__ or current.__context__
    text = _ERRNO_PREFIX.sub("", _one_line(str(deepest))) or "connection failed"
    return text[0].lower() + text[1:]


def _extra(message: Any, key: str) -> Any:
    extras = getattr(message, "model_extra", None) or {}
    return extras.get(key, getattr(message, key, None))


def turn_from_response(response: Any) -> AssistantTurn:
    """Normalise an SDK ``ChatCompletion`` into an ``AssistantTurn``."""
    usage = getattr(response, "usage", None)
    counted = Usage(
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
    )
    choices = getattr(response, "choices", None) or []
    if not choices:
        return AssistantTurn(content=None, usage=counted)
    choice = choices[0]
    message = choice.message
    calls = []
    for index, call in enumerate(getattr(message, "tool_calls", None) or [], start=1):
        function = getattr(call, "function", None) or getattr(call, "custom", None)
        arguments = getattr(function, "arguments", None)
        if arguments is None:
            arguments = getattr(function, "input", "")
        calls.append(
            ToolCall(
                id=call.id or f"call_{index}",
                name=getattr(function, "name", "") or "",
                arguments=arguments if isinstance(arguments, str) else str(arguments),
            )
        )
    reasoning = _extra(message, "reasoning")
    details = _extra(message, "reasoning_details")
    return AssistantTurn(
        content=message.content,
        tool_calls=calls,
        usage=counted,
        finish_reason=choice.finish_reason,
        reasoning=reasoning if isinstance(reasoning, str) else None,
        reasoning_details=details if isinstance(details, list) and details else None,
    )
