"""Our own Chat Completions HTTP: what goes on the wire, and every way an answer comes back."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from tilth.errors import ModelError
from tilth.model import FakeServer, OpenAIModel, Script, raw, reply
from tilth.model.http_chat import sse_events

ModelFactory = Callable[..., OpenAIModel]
USER = [{"role": "user", "content": "build the thing"}]


def _chunk(content: str | None = None, **extra: object) -> str:
    delta = {} if content is None else {"content": content}
    return json.dumps({"choices": [{"index": 0, "delta": delta, **extra}]})


def _events(*events: str, end: str = "\n") -> str:
    """An event-stream body: each entry one event, its lines already written."""
    return "".join(event + end + end for event in events)


def test_the_request_on_the_wire(fast_model: ModelFactory, secret_key: str) -> None:
    with FakeServer(Script([reply("ok")])) as server:
        model = fast_model(server, base_url=server.base_url + "/")
        assert model.complete(USER, []).content == "ok"
    sent = server.requests[0]
    assert sent["path"] == "/v1/chat/completions", "one slash, whatever the base URL ends in"
    headers = sent["headers"]
    assert headers["authorization"] == f"Bearer {secret_key}"
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == "application/json"
    assert headers["user-agent"].startswith("tilth/")
    assert sent["body"] == {
        "model": "test-model",
        "messages": USER,
        "max_tokens": 8192,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_an_event_stream_in_all_its_forms(fast_model: ModelFactory) -> None:
    """Comments, CRLF line ends, a JSON object spread over two data lines, a named event, a
    field without a space after its colon, usage alone at the end, then [DONE]."""
    first = json.dumps({"choices": [{"index": 0, "delta": {"content": "hel"}}]}, indent=1)
    spread = "\r\n".join(f"data: {line}" for line in first.splitlines())
    body = _events(
        ": keep-alive",
        spread,
        f"event: message\r\ndata:{_chunk('lo')}",
        f"id: 7\r\ndata: {_chunk(None, finish_reason='stop')}",
        'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}',
        "data: [DONE]",
        end="\r\n",
    )
    with FakeServer(Script([raw(body, content_type="text/event-stream")])) as server:
        turn = fast_model(server).complete(USER, [])
    assert turn.content == "hello"
    assert turn.finish_reason == "stop"
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (5, 2)


def test_lines_split_anywhere_between_network_reads() -> None:
    body = b'data: {"a": 1}\r\n\r\n: note\rdata: {"b":\ndata: 2}\n\nevent: error\ndata: "x"\n'
    expected = [("message", '{"a": 1}'), ("message", '{"b":\n2}'), ("error", '"x"')]
    assert list(sse_events([body])) == expected, "the last event needs no blank line"
    for size in (1, 2, 3, 5, 7):
        pieces = [body[i : i + size] for i in range(0, len(body), size)]
        assert list(sse_events(pieces)) == expected, f"read {size} bytes at a time"
    assert list(sse_events([b"data: x\r", b"\ndata: y\r", b"\r"])) == [("message", "x\ny")]
    assert list(sse_events([b": only a comment\n\n", b"event: ping\n\n"])) == []


def test_a_byte_order_mark_before_the_stream_keeps_the_first_event() -> None:
    body = b'\xef\xbb\xbfdata: {"a": 1}\n\ndata: \xef\xbb\xbf2\n\n'
    expected = [("message", '{"a": 1}'), ("message", "\ufeff2")]
    for size in (1, 2, len(body)):
        pieces = [body[i : i + size] for i in range(0, len(body), size)]
        assert list(sse_events(pieces)) == expected, f"read {size} bytes at a time"
    assert list(sse_events([b"\xef\xbb\xbfdata: x"])) == [("message", "x")]


@pytest.mark.parametrize("named", [False, True])
def test_an_error_inside_the_stream_is_retried(fast_model: ModelFactory, named: bool) -> None:
    """OpenRouter reports an upstream failure mid-stream as an ``{"error": ...}`` chunk (some
    servers as an event named ``error``); the text before it is dropped with the attempt."""
    failure = {"message": "upstream went away", "code": 502}
    last = (
        f"event: error\ndata: {json.dumps(failure)}"
        if named
        else (f"data: {json.dumps({'error': failure})}")
    )
    body = _events(f"data: {_chunk('half a')}", last, f"data: {_chunk('never read')}")
    reasons: list[str] = []
    script = Script([raw(body, content_type="text/event-stream"), reply("whole")])
    with FakeServer(script) as server:
        model = fast_model(server, on_retry=lambda _, why, __: reasons.append(why))
        assert model.complete(USER, []).content == "whole"
    assert reasons == ["provider error: upstream went away"]


def test_an_event_that_is_not_json_fails_at_once(fast_model: ModelFactory) -> None:
    body = _events(f"data: {_chunk('a')}", "data: {not json")
    script = Script([raw(body, content_type="text/event-stream"), reply("unused")])
    with FakeServer(script) as server:
        with pytest.raises(ModelError) as caught:
            fast_model(server).complete(USER, [])
    assert len(server.requests) == 1
    assert str(caught.value) == (
        f"unreadable reply from the worker model at {server.base_url}: "
        "a streamed event that is not JSON ({not json)"
    )


def test_an_empty_event_stream_is_asked_again_without_streaming(
    fast_model: ModelFactory,
) -> None:
    refused: list[str] = []
    script = Script([raw(_events("data: [DONE]"), content_type="text/event-stream"), reply("hi")])
    with FakeServer(script) as server:
        model = fast_model(server, on_stream_refused=refused.append)
        assert model.complete(USER, []).content == "hi"
    assert [bool(r["body"].get("stream")) for r in server.requests] == [True, False]
    assert refused == ["the endpoint answered a streamed request with no events"]


@pytest.mark.parametrize(
    ("status", "body", "content_type", "shown"),
    [
        (404, {"error": "model 'x' not found"}, "application/json", "model 'x' not found"),
        (400, {"message": "bad schema"}, "application/json", "bad schema"),
        (400, {"error": {"message": "nested"}}, "application/json", "nested"),
        (400, {"detail": "?"}, "application/json", "Bad Request"),
        (403, "<html>proxy says no</html>", "text/html", "Forbidden"),
    ],
)
def test_a_refusal_says_the_bodys_message(
    fast_model: ModelFactory, status: int, body: object, content_type: str, shown: str
) -> None:
    text = body if isinstance(body, str) else json.dumps(body)
    with FakeServer(Script([raw(text, status=status, content_type=content_type)])) as server:
        with pytest.raises(ModelError) as caught:
            fast_model(server).complete(USER, [])
    assert str(caught.value).endswith(f"refused the request: HTTP {status}: {shown}")


def test_a_plain_request_reads_the_same_answers(fast_model: ModelFactory) -> None:
    """Without streaming: a completion, then an error status, then a page."""
    script = Script(
        [
            reply("plain", prompt_tokens=2, completion_tokens=3),
            raw(json.dumps({"error": {"message": "busy"}}), status=503),
            reply("again"),
            raw("<html>login</html>", content_type="text/html"),
        ]
    )
    reasons: list[str] = []
    with FakeServer(script) as server:
        model = fast_model(server, stream=False, on_retry=lambda _, why, __: reasons.append(why))
        turn = model.complete(USER, [])
        assert (turn.content, turn.usage.total) == ("plain", 5)
        assert model.complete(USER, []).content == "again"
        with pytest.raises(ModelError, match="not a chat completion"):
            model.complete(USER, [])
    assert reasons == ["HTTP 503: busy"]
    assert not any("stream" in r["body"] for r in server.requests)


def _read_request(conn: socket.socket) -> None:
    """All of one request (closing with unread bytes would reset the connection instead)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.lower().split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(65536)


@pytest.fixture
def cut_off_server() -> Iterator[str]:
    """A server that starts a chunked event stream and then drops the connection."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                _read_request(conn)
                event = f"data: {_chunk('partial')}\n\n".encode()
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                    + f"{len(event):x}\r\n".encode()
                    + event
                    + b"\r\n"
                )
                conn.shutdown(socket.SHUT_WR)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}/v1"
    listener.close()


def test_a_stream_cut_off_midway_is_a_lost_connection(
    fast_model: ModelFactory, cut_off_server: str
) -> None:
    retries: list[str] = []
    model = fast_model(
        None, base_url=cut_off_server, max_retries=1, on_retry=lambda _, w, __: retries.append(w)
    )
    with pytest.raises(ModelError) as caught:
        model.complete(USER, [])
    assert str(caught.value).startswith(f"could not reach the worker model at {cut_off_server}: ")
    assert str(caught.value).endswith("(after 2 attempts)")
    assert len(retries) == 1 and "closed" in retries[0], retries


def test_proxies_come_from_the_environment(
    fast_model: ModelFactory, closed_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed_port}")
    with FakeServer(Script([reply("direct")])) as server:
        with pytest.raises(ModelError, match="connection refused"):
            fast_model(server, max_retries=0).complete(USER, [])
        assert server.requests == [], "the request went to the (dead) proxy"
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        assert fast_model(server).complete(USER, []).content == "direct"


def test_a_closed_model_opens_new_connections(fast_model: ModelFactory) -> None:
    with FakeServer(Script([reply("one"), reply("two")])) as server:
        model = fast_model(server)
        assert model.complete(USER, []).content == "one"
        model.close()
        model.close()
        assert model.complete(USER, []).content == "two"


@pytest.mark.parametrize(
    ("base_url", "key", "shown"),
    [("http://[::1/v1", "sk-abc", "Invalid port"), ("http://127.0.0.1:9/v1", "sk-äbc", "ascii")],
)
def test_a_request_that_cannot_be_made_fails_at_once(base_url: str, key: str, shown: str) -> None:
    from tilth.config import Endpoint

    model = OpenAIModel(Endpoint("worker", base_url, key, "m"), backoff_seconds=0.001)
    with pytest.raises(ModelError) as caught:
        model.complete(USER, [])
    assert str(caught.value).startswith(f"cannot send a request to the worker model at {base_url}")
    assert shown in str(caught.value)
    assert caught.value.hint == "check TILTH_BASE_URL and TILTH_API_KEY"
