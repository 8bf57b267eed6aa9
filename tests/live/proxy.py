"""A recording pass-through between Tilth and the real server.

Every request Tilth sends and the status it got back are kept, so a test can assert what
Tilth guarantees on the wire (``max_tokens`` on every request, no history the server
refuses, at most one context refusal) while the answers come from llama.cpp itself.
Bodies are relayed as they arrive, so streamed replies stay streamed.
"""

from __future__ import annotations

import http.client
import json
import select
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@dataclass
class Exchange:
    """One request and what the server answered."""

    method: str
    path: str
    body: Any
    status: int = 0
    answer: bytes = b""
    """What was passed on to the client."""
    started: float = 0.0
    """``time.perf_counter()`` when the request arrived."""
    ended: float = 0.0
    """... and when the last byte of the answer was passed on."""

    @property
    def is_completion(self) -> bool:
        return self.method == "POST" and self.path.endswith("/chat/completions")

    def answer_text(self) -> str:
        return self.answer.decode("utf-8", "replace")

    def documents(self) -> list[dict[str, Any]]:
        """The JSON objects of the answer: each event of a stream, or the one body."""
        found: list[dict[str, Any]] = []
        for line in self.answer_text().splitlines():
            line = line.removeprefix("data:").strip()
            if not line.startswith("{"):
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict):
                found.append(data)
        return found

    def finish_reasons(self) -> list[str]:
        """Every ``finish_reason`` the answer carried (streamed or not)."""
        return [
            str(choice["finish_reason"])
            for data in self.documents()
            for choice in data.get("choices") or []
            if choice.get("finish_reason")
        ]

    def server_ms(self) -> float | None:
        """The server's own time for the answer (llama.cpp's ``timings``: prompt + generation)."""
        for data in reversed(self.documents()):
            timings = data.get("timings")
            if isinstance(timings, dict):
                return float(timings.get("prompt_ms") or 0) + float(
                    timings.get("predicted_ms") or 0
                )
        return None


@dataclass
class Recording:
    exchanges: list[Exchange] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def completions(self) -> list[Exchange]:
        with self.lock:
            return [e for e in self.exchanges if e.is_completion]

    def settle(self, timeout: float = 60.0) -> None:
        """Wait until every exchange has ended (a paced relay notices a gone client late)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if all(e.ended for e in self.exchanges):
                    return
            time.sleep(0.1)


class RecordingProxy:
    """``http://127.0.0.1:<port>`` relaying to the server at ``upstream_port``, recording each
    call; with ``pace``, a streamed answer is passed on one event every ``pace`` seconds;
    ``port``: listen there (a free one otherwise).

    ``slots``: how many the server has. With two, each completion request is pinned to one
    (llama.cpp's ``id_slot``, added on the way; the recording keeps what Tilth sent): a
    request with tools (the chat's thread) to slot 0, one without (the summarizer's) to slot
    1. Left to itself the server gives a request whose slot is still busy (a cancelled reply
    it has not noticed yet) to the idle one, where the thread is not cached.
    """

    def __init__(
        self, upstream_port: int, pace: float = 0.0, port: int = 0, slots: int = 1
    ) -> None:
        self.recording = Recording()
        recording = self.recording

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one exchange per connection; the body ends at close

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                self._relay()

            def do_POST(self) -> None:
                self._relay()

            def _relay(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = raw.decode("utf-8", "replace")
                exchange = Exchange(self.command, self.path, body, started=time.perf_counter())
                with recording.lock:
                    recording.exchanges.append(exchange)
                if slots == 2 and exchange.is_completion and isinstance(body, dict):
                    raw = json.dumps({**body, "id_slot": 0 if body.get("tools") else 1}).encode()
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
                upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=600)
                try:
                    upstream.request(self.command, self.path, body=raw or None, headers=headers)
                    answer = upstream.getresponse()
                except OSError:
                    exchange.status = 502
                    self.send_error(502, "upstream unreachable")
                    return
                exchange.status = answer.status
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in _HOP_HEADERS:
                        self.send_header(key, value)
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    while piece := answer.read1(65536):
                        if pace:
                            self._paced(piece, answer, exchange)
                            break
                        self._send(piece, exchange)
                except OSError:
                    pass  # the client went away (a cancelled turn): stop relaying
                finally:
                    exchange.ended = time.perf_counter()
                    upstream.close()

            def _send(self, data: bytes, exchange: Exchange) -> None:
                self.wfile.write(data)
                self.wfile.flush()
                exchange.answer += data

            def _paced(
                self, pending: bytes, answer: http.client.HTTPResponse, exchange: Exchange
            ) -> None:
                """Pass the stream on one event every ``pace`` seconds (a slow server); stop
                as soon as the client hangs up (its socket turns readable: nothing more is
                sent on a connection of one exchange), not at the next write."""
                while True:
                    while b"\n\n" in pending:
                        event, pending = pending.split(b"\n\n", 1)
                        self._send(event + b"\n\n", exchange)
                        if select.select([self.connection], [], [], pace)[0]:
                            return
                    more = answer.read1(65536)
                    if not more:
                        break
                    pending += more
                if pending:
                    self._send(pending, exchange)

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
