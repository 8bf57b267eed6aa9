"""Chat Completions over plain HTTP: one POST, its answer read whole or as server-sent events.

No SDK (importing the official one costs about a second and a half of CPU in every process
that talks to a model): ``ChatHTTP`` keeps one ``httpx.Client`` per model, so connections are
reused, with the key in ``Authorization: Bearer``, proxies from the environment and one
certificate-verifying TLS context per process (``tls_context``). The timeout bounds the
connection, the wait for the first byte and every wait between two bytes, so a stalled
stream fails like a slow answer (``httpx.TimeoutException``); it also bounds the wait
between two events (or comments) of a stream, so one that trickles bytes without events
fails the same way (``StreamStalled``), and the wait for the reply's content: keep-alive
comments and events that carry nothing (an empty delta) keep a connection open, but a
stream that sends only those for longer than the timeout is stalled too.

An answer with an error status raises ``StatusFailure`` (its body parsed when it is JSON);
transport failures raise httpx's own errors; a stream event that is not JSON raises
``UnreadableStream`` (so does an event over ``MAX_EVENT_BYTES``), unreadable trusted
certificates ``TrustUnreadable``. ``sse_events``
parses the event stream itself (``data:`` lines, multi-line data, ``event:`` names,
comments, any of CRLF, LF or CR as line ends).
"""

from __future__ import annotations

import json
import os
import re
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cache
from typing import Any

import httpx

_LINE_END = re.compile(rb"\r\n|\r|\n")
_DONE = "[DONE]"
_BOM = b"\xef\xbb\xbf"
_SHOWN_CHARS = 80
_DRAIN_BYTES = 4096
"""What a stream may still send after ``[DONE]`` and keep its connection for the next call."""
MAX_BODY_BYTES = 32 * 2**20
"""The longest answer read whole (a reply is a small part of it; a page is never this long)."""
MAX_EVENT_BYTES = 8 * 2**20
"""The longest streamed line or event read (a reply's event is a small part of it)."""
USER_AGENT = f"tilth/{getattr(sys.modules.get('tilth'), '__version__', 'unknown')}"
"""Tilth and its version, read off the package (always loaded before its modules) rather
than imported: the package's face sits on a floor above the model's."""


class StatusFailure(Exception):
    """The endpoint answered with an error status; ``body`` is the parsed JSON, else None."""

    def __init__(self, response: httpx.Response, content: bytes) -> None:
        self.status = response.status_code
        self.headers: Mapping[str, str] = response.headers
        self.reason_phrase = response.reason_phrase
        self.text = content.decode(response.encoding or "utf-8", "replace").strip()
        try:
            self.body: Any = json.loads(self.text)
        except (json.JSONDecodeError, RecursionError):
            self.body = None
        super().__init__(f"HTTP {self.status}")


class UnreadableStream(Exception):
    """An event of the stream could not be read as JSON."""


class StreamStalled(Exception):
    """The stream kept sending bytes but no event, or events but no content, for longer
    than the timeout."""


class TrustUnreadable(Exception):
    """The certificates ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` names could not be read."""


@cache
def tls_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """The certificate-verifying TLS context every client of this process shares.

    Reading the trusted certificates costs about 30 ms, and each client would read them
    again (a run makes one per role, a server one per run it drives). The trust is what the
    SDK's HTTP library trusted: ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` when set (they are the
    arguments, so changing them makes another context), else the system's certificates
    (a company's own CA installed there included), else httpx's bundle (certifi) on a system
    that has none where OpenSSL looks.
    """
    if cert_file:
        return ssl.create_default_context(cafile=cert_file)
    if cert_dir:
        return ssl.create_default_context(capath=cert_dir)
    paths = ssl.get_default_verify_paths()
    if (paths.cafile and os.path.isfile(paths.cafile)) or (
        paths.capath and os.path.isdir(paths.capath)
    ):
        return ssl.create_default_context()
    return httpx.create_ssl_context(trust_env=False)


def _shared_tls_context() -> ssl.SSLContext:
    cert_file, cert_dir = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    try:
        return tls_context(cert_file, cert_dir)
    except (OSError, ssl.SSLError) as exc:
        named = f"SSL_CERT_FILE={cert_file}" if cert_file else f"SSL_CERT_DIR={cert_dir}"
        raise TrustUnreadable(f"cannot read the trusted certificates ({named}): {exc}") from None


class ChatHTTP:
    """``POST <base_url>/chat/completions`` for one endpoint, over one connection pool."""

    def __init__(self, base_url: str, api_key: str, timeout_seconds: float) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key
        self._timeout = timeout_seconds
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    def _pool(self) -> httpx.Client:
        """The connection pool, made at the first request (again after ``close``)."""
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(
                    headers={
                        "Authorization": f"Bearer {self._api_key}",
                        "Accept": "application/json",
                        "Content-Type": "application/json",
                        "User-Agent": USER_AGENT,
                    },
                    timeout=self._timeout,
                    verify=_shared_tls_context(),
                    follow_redirects=True,
                )
            return self._client

    def close(self) -> None:
        """Close the open connections (a later request opens new ones)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def post(self, body: dict[str, Any]) -> bytes:
        """The whole answer to a request without ``stream``; raises ``StatusFailure``."""
        pool = self._pool()
        request = pool.build_request("POST", self.url, content=_encode(body))
        response = pool.send(request, stream=True)
        try:
            content = self._whole(response)
            if response.status_code >= 400:
                raise StatusFailure(response, content)
            return content
        finally:
            response.close()

    def _whole(self, response: httpx.Response) -> bytes:
        """An answer's body read whole: at most ``MAX_BODY_BYTES``, within the timeout (the
        server had the answer ready when it sent the headers; an endless or trickling body
        would otherwise be read forever)."""
        parts: list[bytes] = []
        size = 0
        started = time.monotonic()
        for piece in response.iter_bytes():
            size += len(piece)
            if size > MAX_BODY_BYTES:
                raise UnreadableStream(f"an answer longer than {MAX_BODY_BYTES // 2**20} MB")
            if time.monotonic() - started > self._timeout:
                raise StreamStalled(f"the answer's body took over {self._timeout:g}s")
            parts.append(piece)
        return b"".join(parts)

    def stream(self, body: dict[str, Any], on_chunk: Callable[[Any], bool]) -> bytes | bool:
        """Send a streamed request; each event's JSON goes to ``on_chunk`` (True: stop reading).

        Returns whether ``[DONE]`` ended the stream once it ended (False: the body ended
        without it, or ``on_chunk`` stopped the reading), or the whole body when the answer is
        not an event stream (an endpoint that ignores ``stream``).
        """
        pool = self._pool()
        request = pool.build_request("POST", self.url, content=_encode(body))
        response = pool.send(request, stream=True)
        finished = False
        try:
            if response.status_code >= 400:
                raise StatusFailure(response, self._whole(response))
            if "event-stream" not in response.headers.get("content-type", ""):
                return self._whole(response)
            ended = [False]
            content = _ContentClock(self._timeout)
            pieces = _until_end(content.watch(response.iter_bytes()), ended)
            events = sse_events(pieces, idle_seconds=self._timeout)
            for event, data in events:
                if data.startswith(_DONE):
                    finished = True
                    break
                try:
                    chunk = _chunk(data)
                except UnreadableStream:
                    if ended[0]:
                        return False  # the body stopped mid-event: a cut, not a bad event
                    raise
                if event == "error" and not (isinstance(chunk, dict) and chunk.get("error")):
                    chunk = {"error": chunk}
                if carries_content(chunk):
                    content.heard()
                if on_chunk(chunk):
                    break
            return finished
        finally:
            if finished:
                _close_later(response, pieces)
            else:
                response.close()


class _ContentClock:
    """How long a stream has gone without content: keep-alives do not count."""

    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self._last = time.monotonic()

    def heard(self) -> None:
        self._last = time.monotonic()

    def watch(self, pieces: Iterator[bytes]) -> Iterator[bytes]:
        """``pieces``; ``StreamStalled`` once one was read past the timeout since content.

        The check follows each piece's reading, so content in it counts, and stray bytes
        are told as such by ``sse_events`` first (its clock started before this one).
        """
        self._last = time.monotonic()
        for piece in pieces:
            yield piece
            if time.monotonic() - self._last > self._timeout:
                raise StreamStalled(
                    f"the stream stalled: no reply content within {self._timeout:g}s, "
                    "only keep-alive comments or empty events"
                )


def carries_content(chunk: Any) -> bool:
    """Whether a streamed event brings part of a reply: text, reasoning, a tool call, a
    finish reason, usage or an error (not a role alone, an empty delta or no choices)."""
    if not isinstance(chunk, dict):
        return False
    if chunk.get("error") or chunk.get("usage"):
        return True
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, dict):
            continue
        if choice.get("finish_reason"):
            return True
        delta = choice.get("delta") or choice.get("message")
        if isinstance(delta, dict) and any(v for k, v in delta.items() if k != "role"):
            return True
    return False


def _until_end(pieces: Iterator[bytes], ended: list[bool]) -> Iterator[bytes]:
    """``pieces``, then ``ended[0] = True`` once the body has no more."""
    yield from pieces
    ended[0] = True


def _close_later(response: httpx.Response, pieces: Iterator[bytes]) -> None:
    """Close a stream that sent ``[DONE]`` once the rest of its body came, off the caller's
    thread: a response closed before its end closes its connection too, so every streamed
    call would open a new one (a TCP and TLS handshake each turn). A server that sends more
    than a few bytes after ``[DONE]``, or holds the body open, loses the connection (at the
    latest after the read timeout); the reply never waits for it."""

    def drain() -> None:
        try:
            left = _DRAIN_BYTES
            for piece in pieces:
                left -= len(piece)
                if left < 0:
                    break
        except Exception:  # a background tidy-up: whatever fails, the reply is already out
            pass
        finally:
            response.close()

    threading.Thread(target=drain, name="tilth-stream-drain", daemon=True).start()


def _encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _chunk(data: str) -> Any:
    try:
        return json.loads(data)
    except (json.JSONDecodeError, RecursionError):
        shown = " ".join(data.split())[:_SHOWN_CHARS]
        raise UnreadableStream(f"a streamed event that is not JSON ({shown})") from None


def sse_events(
    chunks: Iterable[bytes], *, idle_seconds: float | None = None
) -> Iterator[tuple[str, str]]:
    """``(event name, data)`` for each server-sent event in the bytes, as they arrive.

    Lines end in CRLF, LF or CR (a CR at the end of one piece waits for the next: it may be
    half of a CRLF). Data lines of one event are joined with newlines; comments (``:``) and
    other fields are skipped; an event without data is none. An event the stream ended in
    without its blank line still counts. A byte order mark the stream starts with is dropped
    (the event-stream standard allows one; kept, it would hide the first event's field).

    Only the new bytes of each piece are searched for line ends, so a long event costs its
    length once, however many pieces it came in. A line or event longer than
    ``MAX_EVENT_BYTES`` raises ``UnreadableStream``; with ``idle_seconds``, bytes that bring
    neither an event nor a comment for that long raise ``StreamStalled`` (a server that
    trickles a byte at a time never trips a read timeout).
    """
    pending = bytearray()
    scanned = 0  # pending[:scanned] holds no line end
    event = _Event()
    first_line = True
    heard = time.monotonic()
    for piece in chunks:
        pending += piece
        start = 0
        while (found := _LINE_END.search(pending, scanned)) is not None:
            if found.group() == b"\r" and found.end() == len(pending):
                break  # maybe half of a CRLF: wait for the next piece
            line = bytes(pending[start : found.start()])
            start = scanned = found.end()
            if first_line:
                line, first_line = line.removeprefix(_BOM), False
            taken = event.take(line)
            if taken is not None or line.startswith(b":"):
                heard = time.monotonic()
            if taken is not None:
                yield taken
        del pending[:start]
        scanned = len(pending) - 1 if pending.endswith(b"\r") else len(pending)
        if len(pending) + event.size > MAX_EVENT_BYTES:
            raise UnreadableStream(
                f"a streamed event longer than {MAX_EVENT_BYTES // 2**20} MB "
                "(the server sent no end to it)"
            )
        if idle_seconds is not None and time.monotonic() - heard > idle_seconds:
            raise StreamStalled(
                f"the stream stalled: no event within {idle_seconds:g}s, only stray bytes"
            )
    for line in [*_LINE_END.split(bytes(pending)), b""] if pending else [b""]:
        if first_line:
            line, first_line = line.removeprefix(_BOM), False
        taken = event.take(line)
        if taken is not None:
            yield taken


class _Event:
    """The event being read: its name and data lines so far."""

    def __init__(self) -> None:
        self.name = ""
        self.data: list[str] = []
        self.size = 0
        """The bytes of the data lines so far."""

    def take(self, raw: bytes) -> tuple[str, str] | None:
        """Read one line; the finished event when the line is blank and data was given."""
        line = raw.decode("utf-8", "replace")
        if not line:
            found = (self.name or "message", "\n".join(self.data)) if self.data else None
            self.name, self.data, self.size = "", [], 0
            return found
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            self.data.append(value)
            self.size += len(raw)
        elif field == "event":
            self.name = value
        return None
