"""A loopback server speaking OpenAI Chat Completions from a ``Script``.

``POST /v1/chat/completions`` (also without ``/v1``) answers with the script's next reply for the
request's ``model``, as JSON or, with ``"stream": true``, as server-sent events; ``GET /v1/models``
lists the scripted models. Every POST is recorded in ``.requests``, every GET in ``.probes``.
Streamed replies split text, reasoning and tool-call arguments into many chunks (as real
providers do); a ``stall`` reply goes silent mid-stream; ``reject_stream=True`` answers every
streamed request with HTTP 400, as an endpoint that cannot stream does. A reply longer than
the request's ``max_tokens`` (counted about 3.5 characters a token) is cut there, mid-text or
mid-arguments, with ``finish_reason: length``, as llama.cpp and every provider cut it.

llama.cpp's manners, as options (``LlamaManners``): refuse a history holding tool-call
arguments that are not valid JSON (HTTP 500, as ``llama-server`` does), serve ``/props``
with ``n_ctx`` and ``chat_template_caps.supports_tools``, refuse a prompt longer than the
context (HTTP 400 ``exceed_context_size_error``), count ``usage.prompt_tokens`` from the
request's size, and leave models out of ``/models``. Run it standalone with
``python -m tilth.model.fake_server --script FILE [--port N] [--n-ctx N] ...``: the first
line printed is the base URL to put in ``TILTH_BASE_URL``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from tilth.errors import TilthError
from tilth.model.fake_replies import (
    completion_body,
    context_refusal,
    invalid_arguments,
    prompt_tokens,
    stream_chunks,
    unanswered_call,
    within_limit,
)
from tilth.model.script import Reply, Script

_COMPLETIONS_PATHS = ("/v1/chat/completions", "/chat/completions")
_MODELS_PATHS = ("/v1/models", "/models")
_PROPS_PATHS = ("/props", "/v1/props")
FAKE_API_KEY = "fake-key"
STREAM_REFUSAL = "stream is not supported by this endpoint"


@dataclass(frozen=True)
class LlamaManners:
    """How far the fake server behaves like llama.cpp's ``llama-server`` (all off by default)."""

    refuse_invalid_arguments: bool = False
    """Answer a history whose tool-call arguments are not valid JSON with HTTP 500."""
    refuse_unanswered_calls: bool = False
    """Answer a history with a tool call no tool message answers with HTTP 400 (OpenAI's
    rule, which hosted servers and vLLM keep; llama.cpp lets it pass)."""
    n_ctx: int | None = None
    """The context window: ``/props`` reports it, a longer prompt is refused (HTTP 400)."""
    supports_tools: bool | None = None
    """``/props`` ``chat_template_caps.supports_tools`` (None, with no ``n_ctx``: no ``/props``)."""
    count_prompt_tokens: bool = False
    """``usage.prompt_tokens`` counted from the request's size, not taken from the script."""
    unlisted: tuple[str, ...] = ()
    """Models ``/models`` leaves out (they are still served)."""
    props: bool = True
    """Serve ``/props`` (False: a server that refuses long prompts but never says its window)."""

    @property
    def has_props(self) -> bool:
        return self.props and (self.n_ctx is not None or self.supports_tools is not None)


class FakeServer:
    """A scripted OpenAI-compatible endpoint on ``host:port`` (port 0 picks a free one)."""

    def __init__(
        self,
        script: Script,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        reject_stream: bool = False,
        api_key: str | None = None,
        manners: LlamaManners | None = None,
        honour_max_tokens: bool = True,
    ) -> None:
        self.script = script
        self.honour_max_tokens = honour_max_tokens
        """Cut a reply longer than the request's ``max_tokens`` there (False: answer whole, as
        a scripted model standing beside a real one whose replies a small limit cuts)."""
        self.manners = manners or LlamaManners()
        """llama.cpp's behaviours this server imitates."""
        self.reject_stream = reject_stream
        """Answer ``"stream": true`` requests with HTTP 400 (an endpoint that cannot stream)."""
        self.api_key = api_key
        """When set, requests without ``Authorization: Bearer <api_key>`` get HTTP 401."""
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._probes: list[dict[str, Any]] = []
        self._counter = 0
        self._abandoned = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._bound_port: int | None = None
        self._thread: threading.Thread | None = None

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every POST so far: ``{"path", "headers" (lower-case names), "body"}``."""
        with self._lock:
            return list(self._requests)

    @property
    def probes(self) -> list[dict[str, Any]]:
        """Every GET so far (``/models``, ``/props``): ``{"path", "headers", "body": None}``."""
        with self._lock:
            return list(self._probes)

    @property
    def abandoned(self) -> int:
        """Requests whose client went away before the answer was sent (never printed)."""
        with self._lock:
            return self._abandoned

    def note_abandoned(self) -> None:
        with self._lock:
            self._abandoned += 1

    @property
    def port(self) -> int:
        """The bound port (still known after ``stop``)."""
        if self._bound_port is None:
            raise RuntimeError("the fake server has not been started")
        return self._bound_port

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"http://{self._host}:{self.port}/v1"

    def start(self) -> FakeServer:
        """Bind and serve in a background thread."""
        if self._httpd is not None:
            return self
        httpd = _Server((self._host, self._port), _Handler)
        httpd.daemon_threads = True
        # Stopping must not wait for a handler still sleeping in a scripted delay.
        httpd.block_on_close = False
        httpd.fake = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._bound_port = int(httpd.server_address[1])
        # A short poll interval keeps ``stop`` (and so every test using the server) quick.
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="tilth-fake-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted (the ``-m`` entry point)."""
        self.start()
        assert self._thread is not None
        while self._thread.is_alive():
            self._thread.join(timeout=0.5)

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def record(self, path: str, headers: dict[str, str], body: Any, *, probe: bool = False) -> None:
        with self._lock:
            found = self._probes if probe else self._requests
            found.append({"path": path, "headers": headers, "body": body})

    def next_completion_id(self) -> str:
        with self._lock:
            self._counter += 1
            return f"chatcmpl-fake-{self._counter}"

    def tilth_env(
        self, *, worker: str = "worker", evaluator: str = "evaluator", prep: str = "prep"
    ) -> dict[str, str]:
        """Settings aiming every Tilth role here; a role's model name picks its script queue."""
        return {
            "TILTH_BASE_URL": self.base_url,
            "TILTH_API_KEY": FAKE_API_KEY,
            "TILTH_WORKER_MODEL": worker,
            "TILTH_EVALUATOR_MODEL": evaluator,
            "TILTH_PREP_MODEL": prep,
        }

    def model_names(self) -> list[str]:
        """What ``/models`` lists: the script's models, minus the ones left out."""
        names = self.script.models or ["scripted"]
        return [name for name in names if name not in self.manners.unlisted]

    def props(self) -> dict[str, Any]:
        """llama.cpp's ``/props`` body, as far as Tilth reads it."""
        props: dict[str, Any] = {"build_info": "tilth-fake-server"}
        if self.manners.n_ctx is not None:
            props["default_generation_settings"] = {"n_ctx": self.manners.n_ctx}
        if self.manners.supports_tools is not None:
            props["chat_template_caps"] = {"supports_tools": self.manners.supports_tools}
        return props


class _Server(ThreadingHTTPServer):
    request_queue_size = 128
    """Many callers at once (a test's twenty threads) must wait in the backlog, never be reset."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (its timeout fired, ``tilth doctor`` gave up on ``/models``)
        is counted, not printed as a traceback; anything else is a bug and printed."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            self.fake.note_abandoned()  # type: ignore[attr-defined]
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server_version = "tilth-fake-server"

    @property
    def fake(self) -> FakeServer:
        return self.server.fake  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests and the demo do not want access logs on stderr."""

    def _authorized(self) -> bool:
        wanted = self.fake.api_key
        if wanted is None or self.headers.get("Authorization") == f"Bearer {wanted}":
            return True
        self._send_error(401, "Incorrect API key provided")
        return False

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        self.fake.record(path, self._headers(), None, probe=True)
        if not self._authorized():
            return
        if path in _PROPS_PATHS and self.fake.manners.has_props:
            self._send_json(200, self.fake.props())
            return
        if path not in _MODELS_PATHS:
            self._send_error(404, f"no route for GET {path}")
            return
        models = [
            {"id": name, "object": "model", "created": 0, "owned_by": "tilth-fake-server"}
            for name in self.fake.model_names()
        ]
        self._send_json(200, {"object": "list", "data": models})

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError):
            self.fake.record(path, self._headers(), raw.decode("utf-8", "replace"))
            self._send_error(400, "request body is not valid JSON")
            return
        self.fake.record(path, self._headers(), body)
        if path not in _COMPLETIONS_PATHS:
            self._send_error(404, f"no route for POST {path}")
            return
        if not isinstance(body, dict):
            self._send_error(400, "request body must be a JSON object")
            return
        if not self._authorized():
            return
        if body.get("stream") and self.fake.reject_stream:
            self._send_error(400, STREAM_REFUSAL)
            return
        refusal = self._llama_refusal(body)
        if refusal is not None:
            self._send_json(refusal["error"]["code"], refusal)
            return
        model = str(body.get("model", ""))
        try:
            reply = self.fake.script.next(model, body)
        except Exception as exc:  # a script function's bug must reach the test as an answer
            self._send_error(500, f"script failed: {exc}")
            return
        stalls: list[tuple[int, float]] = []
        while reply["type"] in ("delay", "stall"):
            if reply["type"] == "stall" and body.get("stream"):
                stalls.append((reply["after"], reply["seconds"]))
            else:
                time.sleep(reply["seconds"])
            reply = reply["then"]
        if reply["type"] == "reply" and self.fake.honour_max_tokens:
            reply = within_limit(reply, body)
        if reply["type"] == "reply" and self.fake.manners.count_prompt_tokens:
            usage = dict(reply.get("usage") or {"completion_tokens": 5})
            reply = {**reply, "usage": {**usage, "prompt_tokens": prompt_tokens(body)}}
        try:
            if reply["type"] == "error":
                self._send_error(reply["status"], reply["message"], reply.get("retry_after"))
            elif reply["type"] == "raw":
                self._send_raw(reply["status"], reply["body"], reply["content_type"])
            elif body.get("stream"):
                self._send_stream(model, reply, body, stalls)
            else:
                self._send_json(200, completion_body(self.fake.next_completion_id(), model, reply))
        except ConnectionError:  # the client gave up (its timeout fired during a delay)
            self.fake.note_abandoned()

    def _llama_refusal(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """llama.cpp's answer to a request it will not take (None: it takes it)."""
        manners = self.fake.manners
        if manners.refuse_invalid_arguments:
            bad = invalid_arguments(body)
            if bad is not None:
                return bad
        if manners.refuse_unanswered_calls:
            bad = unanswered_call(body)
            if bad is not None:
                return bad
        if manners.n_ctx is not None:
            return context_refusal(body, manners.n_ctx)
        return None

    def _headers(self) -> dict[str, str]:
        return {name.lower(): value for name, value in self.headers.items()}

    def _send_json(self, status: int, payload: Any) -> None:
        self._send_raw(status, json.dumps(payload), "application/json")

    def _send_raw(
        self, status: int, body: str, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, status: int, message: str, retry_after: float | None = None) -> None:
        kind = "rate_limit_error" if status == 429 else "scripted_error"
        payload = {"error": {"message": message, "type": kind, "code": status}}
        headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
        self._send_raw(status, json.dumps(payload), "application/json", headers)

    def _send_stream(
        self, model: str, reply: Reply, body: dict[str, Any], stalls: list[tuple[int, float]]
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        completion_id = self.fake.next_completion_id()
        waits = dict(stalls)
        for number, chunk in enumerate(stream_chunks(completion_id, model, reply, body)):
            if number in waits:
                time.sleep(waits[number])  # silent mid-stream: the client's read timeout fires
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535; 0: any free)")
    return port


def main(argv: list[str] | None = None) -> int:
    """Serve a script file until killed; print the base URL first."""
    parser = argparse.ArgumentParser(
        prog="python -m tilth.model.fake_server",
        description="Serve scripted OpenAI Chat Completions replies on loopback.",
    )
    parser.add_argument("--script", required=True, help="JSON script file (see docs/models.md)")
    parser.add_argument("--port", type=_port, default=0, help="port to bind (default: any free)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    parser.add_argument(
        "--n-ctx", type=int, default=None, help="context window: /props says it, longer is refused"
    )
    parser.add_argument(
        "--no-tools", action="store_true", help="/props says the chat template takes no tools"
    )
    parser.add_argument(
        "--refuse-invalid-arguments",
        action="store_true",
        help="HTTP 500 for a history with tool-call arguments that are not JSON",
    )
    parser.add_argument(
        "--count-prompt-tokens", action="store_true", help="usage.prompt_tokens from request size"
    )
    parser.add_argument(
        "--unlisted", action="append", default=[], metavar="MODEL", help="leave out of /models"
    )
    args = parser.parse_args(argv)
    manners = LlamaManners(
        refuse_invalid_arguments=args.refuse_invalid_arguments,
        n_ctx=args.n_ctx,
        supports_tools=False if args.no_tools else (True if args.n_ctx else None),
        count_prompt_tokens=args.count_prompt_tokens,
        unlisted=tuple(args.unlisted),
    )
    try:
        script = Script.from_file(args.script)
        server = FakeServer(script, host=args.host, port=args.port, manners=manners).start()
    except TilthError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 2
    print(server.base_url, flush=True)
    settings = " ".join(f"{name}={value}" for name, value in server.tilth_env().items())
    print(f"serving {args.script}; point tilth here with: {settings}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
