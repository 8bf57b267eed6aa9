"""A hostile server on a raw socket: answers and event streams no polite server sends.

Each server here writes exactly the bytes a test gives it (or pauses, or trickles forever),
so the client meets what proxies, crashed servers and half-compatible endpoints really send.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from tilth.errors import ModelError
from tilth.model import OpenAIModel
from tilth.model.answers import retry_after
from tilth.model.call import DeadlineReached, ask
from tilth.model.openai_client import MAX_BACKOFF_SECONDS, retry_wait

ModelFactory = Callable[..., OpenAIModel]
USER = [{"role": "user", "content": "build the thing"}]
Writes = Iterable[bytes | float]
"""What the server sends after reading a request: bytes, or a pause in seconds."""
STREAM_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
DONE = b"data: [DONE]\n\n"


def _chunk(delta: dict[str, object], **extra: object) -> bytes:
    return json.dumps({"choices": [{"index": 0, "delta": delta, **extra}]}).encode()


def _event(delta: dict[str, object], **extra: object) -> bytes:
    return b"data: " + _chunk(delta, **extra) + b"\n\n"


def _whole(status: bytes, content_type: bytes, body: bytes, *extra: bytes) -> bytes:
    head = [b"HTTP/1.1 " + status, b"content-type: " + content_type, *extra]
    head.append(b"content-length: %d" % len(body))
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def _read_request(conn: socket.socket) -> bool:
    """Read one request off ``conn``; False when the client closed it first."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(65536)
        if not piece:
            return False
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.lower().split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(65536)
    return True


class RawServer:
    """Answers each request with the next entry of ``answers`` (the last one again and again),
    written as given, then closes the connection; ``connections`` counts those accepted."""

    def __init__(self, answers: list[Callable[[], Writes]]) -> None:
        self.answers = answers
        self.requests = 0
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                if not _read_request(conn):
                    continue
                writes = self.answers[min(self.requests, len(self.answers) - 1)]()
                self.requests += 1
                try:
                    for write in writes:
                        if isinstance(write, float):
                            time.sleep(write)
                        else:
                            conn.sendall(write)
                    conn.shutdown(socket.SHUT_WR)
                    conn.recv(1)
                except OSError:
                    pass


ServerFactory = Callable[..., RawServer]


@pytest.fixture
def raw_server() -> Iterator[ServerFactory]:
    """``raw_server(writes, ...)``: a server answering the n-th request with the n-th writes."""
    made: list[RawServer] = []

    def make(*answers: Writes | Callable[[], Writes]) -> RawServer:
        made.append(RawServer([a if callable(a) else (lambda a=a: a) for a in answers]))
        return made[-1]

    yield make
    for server in made:
        server.listener.close()


def test_usage_in_a_last_chunk_without_choices_and_no_done(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    usage = b'{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}'
    server = raw_server(
        [
            STREAM_HEAD,
            b": keep-alive\r\n\r\nevent: message\r\ndata: ",
            _chunk({"content": "he"}),
            b"\r\n\r\n" + _event({"content": "llo"}, finish_reason="stop"),
            b"data: " + usage + b"\r\n\r\n",
        ]
    )
    turn = fast_model(None, base_url=server.base_url).complete(USER, [])
    assert (turn.content, turn.usage.total, turn.finish_reason) == ("hello", 9, "stop")


def test_tool_call_deltas_with_an_index_gap_a_late_id_and_a_split_escape(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    """Index 0 never comes, the id only in the second chunk, ``\\u00e9`` cut in two."""
    first = {"tool_calls": [{"index": 2, "function": {"name": "read_file", "arguments": '{"pa'}}]}
    second = {
        "tool_calls": [{"index": 2, "id": "call_9", "function": {"arguments": 'th": "caf\\u00'}}]
    }
    third = {"tool_calls": [{"index": 2, "function": {"arguments": 'e9"}'}}]}
    server = raw_server(
        [STREAM_HEAD, _event(first), _event(second), _event(third, finish_reason=None), DONE]
    )
    turn = fast_model(None, base_url=server.base_url).complete(USER, [])
    assert [(c.id, c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
        ("call_9", "read_file", {"path": "café"})
    ]
    assert turn.finish_reason is None  # null at the end: nothing invented


def test_an_empty_choices_list_is_an_empty_reply_not_a_crash(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    server = raw_server(
        [STREAM_HEAD, b'data: {"choices":[]}\n\n', b'data: {"choices":[],"usage":null}\n\n', DONE]
    )
    turn = fast_model(None, base_url=server.base_url).complete(USER, [])
    assert (turn.content, turn.tool_calls) == (None, [])


def test_a_byte_that_is_not_utf8_does_not_break_the_reply(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    server = raw_server(
        [STREAM_HEAD, b'data: {"choices":[{"index":0,"delta":{"content":"a\xffb"}}]}\n\n', DONE]
    )
    turn = fast_model(None, base_url=server.base_url).complete(USER, [])
    assert turn.content == "a\ufffdb"


def test_a_multibyte_character_split_between_writes(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    event = (
        b"data: "
        + json.dumps(
            {"choices": [{"index": 0, "delta": {"content": "é"}}]}, ensure_ascii=False
        ).encode()
        + b"\n\n"
    )
    cut = event.index("é".encode()) + 1
    server = raw_server([STREAM_HEAD, event[:cut], 0.05, event[cut:], DONE])
    assert fast_model(None, base_url=server.base_url).complete(USER, []).content == "é"


def test_a_200_with_an_html_page(fast_model: ModelFactory, raw_server: ServerFactory) -> None:
    page = b"<html><body>Sign in to the proxy</body></html>"
    server = raw_server([_whole(b"200 OK", b"text/html", page)])
    with pytest.raises(ModelError) as caught:
        fast_model(None, base_url=server.base_url, max_retries=0).complete(USER, [])
    assert "not a chat completion (<html><body>Sign in to the proxy" in str(caught.value)
    assert "BASE_URL" in (caught.value.hint or "")


def test_a_200_with_json_that_is_not_a_completion(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    body = b'{"object": "list", "data": []}'
    server = raw_server([_whole(b"200 OK", b"application/json", body)])
    with pytest.raises(ModelError, match="not a chat completion"):
        fast_model(None, base_url=server.base_url, max_retries=0).complete(USER, [])


@pytest.mark.parametrize("status", [b"429 Too Many Requests", b"503 Busy"])
def test_retry_after_in_seconds_is_obeyed(
    fast_model: ModelFactory, raw_server: ServerFactory, status: bytes
) -> None:
    refusal = _whole(status, b"application/json", b"{}", b"retry-after: 1")
    server = raw_server([refusal], [STREAM_HEAD, _event({"content": "ok"}), DONE])
    waits: list[float] = []
    model = fast_model(None, base_url=server.base_url, on_retry=lambda a, _, w: waits.append(w))
    assert model.complete(USER, []).content == "ok"
    assert waits == [1.0]


def test_retry_after_as_an_http_date_is_obeyed(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    """``Retry-After: <HTTP date>`` (RFC 9110) was ignored: the retry came after milliseconds
    and drew the same 429."""

    def refusal() -> Writes:
        when = format_datetime(datetime.now(UTC) + timedelta(seconds=2), usegmt=True)
        return [
            _whole(b"429 Slow Down", b"application/json", b"{}", b"retry-after: " + when.encode())
        ]

    server = raw_server(refusal, [STREAM_HEAD, _event({"content": "ok"}), DONE])
    retries: list[tuple[str, float]] = []
    model = fast_model(
        None, base_url=server.base_url, on_retry=lambda a, why, w: retries.append((why, w))
    )
    assert model.complete(USER, []).content == "ok"
    [(reason, wait)] = retries
    assert reason.startswith("HTTP 429") and 1.0 <= wait <= 2.0, retries


def test_retry_after_is_capped_and_a_date_gone_by_is_no_wait() -> None:
    assert retry_wait(1, 0.001, 86_400.0) == MAX_BACKOFF_SECONDS
    assert retry_wait(1, 0.001, 3.0) == 3.0
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10.0
    assert retry_after({"retry-after": "soon"}) is None


def test_headers_that_never_come_time_out(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    server = raw_server([2.0])
    model = fast_model(None, base_url=server.base_url, max_retries=0, timeout_seconds=0.3)
    with pytest.raises(ModelError, match=r"no answer within 0\.3s") as caught:
        model.complete(USER, [])
    assert "TILTH_MODEL_TIMEOUT_SECONDS" in (caught.value.hint or "")


def test_a_stream_that_trickles_a_byte_at_a_time_stalls_out(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    """A byte every 0.1 s never trips the read timeout; without an event the stream used to
    be read forever (the thread kept going after the caller's deadline gave up on it)."""
    server = raw_server(lambda: itertools.chain([STREAM_HEAD], itertools.cycle([b"d", 0.1])))
    model = fast_model(None, base_url=server.base_url, max_retries=0, timeout_seconds=0.5)
    with pytest.raises(ModelError, match=r"the stream stalled: no event within 0\.5s") as caught:
        ask(model, USER, [], deadline=time.monotonic() + 20)
    assert "TILTH_MODEL_TIMEOUT_SECONDS" in (caught.value.hint or "")


def test_keep_alive_comments_are_not_a_stall(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    """Comments between pieces of content, the whole stream longer than the timeout."""
    waiting = [b": PROCESSING\n\n", 0.15, b": PROCESSING\n\n", 0.15]
    pieces = [[*waiting, _event({"content": word})] for word in ("o", "k", "!", "!")]
    server = raw_server([STREAM_HEAD, *itertools.chain(*pieces), DONE])
    model = fast_model(None, base_url=server.base_url, max_retries=0, timeout_seconds=1.0)
    assert model.complete(USER, []).content == "ok!!"


@pytest.mark.parametrize(
    ("keep_alive", "name"),
    [
        (b": keep-alive\n\n", "comments"),
        (_event({}), "empty deltas"),
        (_event({"role": "assistant", "content": ""}), "a role alone"),
        (b'data: {"choices": []}\n\n', "no choices"),
    ],
)
def test_a_stream_that_only_keeps_alive_stalls_out_and_the_retry_says_so(
    fast_model: ModelFactory, raw_server: ServerFactory, keep_alive: bytes, name: str
) -> None:
    """Each keep-alive came well within the timeout, so the call used to be held forever."""
    server = raw_server(lambda: itertools.chain([STREAM_HEAD], itertools.cycle([keep_alive, 0.05])))
    retries: list[str] = []
    model = fast_model(
        None,
        base_url=server.base_url,
        max_retries=1,
        timeout_seconds=0.5,
        on_retry=lambda attempt, reason, delay: retries.append(reason),
    )
    started = time.monotonic()
    with pytest.raises(ModelError, match=r"no reply content within 0\.5s") as caught:
        ask(model, USER, [], deadline=time.monotonic() + 20)
    assert time.monotonic() - started < 10, name
    said = (
        "the stream stalled: no reply content within 0.5s, only keep-alive comments or empty events"
    )
    assert retries == [said], "the retry line says what happened"
    assert "(after 2 attempts)" in str(caught.value)
    assert "TILTH_MODEL_TIMEOUT_SECONDS" in (caught.value.hint or "")
    assert server.requests == 2


def test_a_line_that_never_ends_is_cut_off_with_a_clear_error(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    """Without a cap the pending line grew until memory or the deadline gave out."""
    piece = b"x" * 65536
    server = raw_server(lambda: itertools.chain([STREAM_HEAD, b"data: "], itertools.repeat(piece)))
    model = fast_model(None, base_url=server.base_url, max_retries=0)
    with pytest.raises(ModelError, match="a streamed event longer than 8 MB"):
        ask(model, USER, [], deadline=time.monotonic() + 20)


@pytest.mark.parametrize(
    ("cut", "where"),
    [
        ([STREAM_HEAD], "before its first event"),
        ([STREAM_HEAD, _event({"content": "half of it"})], "mid-reply"),
    ],
)
def test_a_stream_the_connection_cut_is_asked_again_streamed(
    fast_model: ModelFactory, raw_server: ServerFactory, cut: list[bytes], where: str
) -> None:
    """A body read until the connection closes ends without a word. Closed after the headers
    it was taken for an endpoint that cannot stream (streaming was off for the rest of the
    run); closed mid-reply, half a reply was taken for the whole one."""
    server = raw_server(cut, [STREAM_HEAD, _event({"content": "whole"}, finish_reason="stop")])
    reasons: list[str] = []
    refused: list[str] = []
    model = fast_model(
        None,
        base_url=server.base_url,
        on_retry=lambda a, why, w: reasons.append(why),
        on_stream_refused=refused.append,
    )
    assert model.complete(USER, []).content == "whole"
    assert reasons == [f"the stream ended {where}, without a finish_reason or [DONE]"]
    assert (model.stream, refused) == (True, [])


def test_a_cut_stream_fails_with_its_reason_after_the_retries(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    server = raw_server([STREAM_HEAD, _event({"content": "half"})])
    with pytest.raises(ModelError, match="the stream ended mid-reply") as caught:
        fast_model(None, base_url=server.base_url, max_retries=1).complete(USER, [])
    assert str(caught.value).endswith("(after 2 attempts)")


def test_a_stream_cut_mid_json_is_asked_again(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    """The body stopped inside an event: a lost connection, retried (it was "unreadable")."""
    cut = [STREAM_HEAD, _event({"content": "a"}), b'data: {"choices":[{"index":0,"delta":{"cont']
    server = raw_server(cut, [STREAM_HEAD, _event({"content": "whole"}, finish_reason="stop")])
    reasons: list[str] = []
    model = fast_model(
        None, base_url=server.base_url, on_retry=lambda a, why, w: reasons.append(why)
    )
    assert model.complete(USER, []).content == "whole"
    assert reasons == ["the stream ended mid-reply, without a finish_reason or [DONE]"]


def test_a_whole_event_that_is_not_json_is_unreadable_at_once(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    server = raw_server([STREAM_HEAD, _event({"content": "a"}), b"data: {not json\n\n"])
    with pytest.raises(ModelError, match=r"a streamed event that is not JSON \(\{not json\)"):
        fast_model(None, base_url=server.base_url).complete(USER, [])
    assert server.requests == 1


def test_two_megabytes_of_content_in_small_writes(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    """One 2 MB event in 1 KB writes (``benchmarks/`` has no timing for it: reading it was
    quadratic, about 19 CPU seconds, before ``sse_events`` searched only the new bytes)."""
    text = "x" * (2 * 1024 * 1024)
    event = _event({"content": text}) + DONE
    pieces: list[bytes | float] = [event[i : i + 1024] for i in range(0, len(event), 1024)]
    server = raw_server([STREAM_HEAD, *pieces])
    assert fast_model(None, base_url=server.base_url).complete(USER, []).content == text


class KeepAliveServer:
    """Answers every request on a connection with a chunked event stream, keeping the
    connection open; ``hold`` seconds pass between ``[DONE]`` and the end of the body."""

    def __init__(self, hold: float) -> None:
        self.hold = hold
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        def chunked(data: bytes) -> bytes:
            return b"%x\r\n%s\r\n" % (len(data), data)

        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        with conn:
            try:
                while _read_request(conn):
                    conn.sendall(head + b"transfer-encoding: chunked\r\n\r\n")
                    conn.sendall(chunked(_event({"content": "hi"}, finish_reason="stop")))
                    conn.sendall(chunked(DONE))
                    time.sleep(self.hold)
                    conn.sendall(b"0\r\n\r\n")
            except OSError:
                pass


def test_streamed_calls_reuse_their_connection(fast_model: ModelFactory) -> None:
    """Closing a stream at ``[DONE]``, before its body's end, closed the connection too:
    every call opened a new one (a TCP and TLS handshake per turn)."""
    server = KeepAliveServer(hold=0.0)
    model = fast_model(None, base_url=server.base_url)
    try:
        for _ in range(4):
            assert model.complete(USER, []).content == "hi"
            time.sleep(0.2)  # the body's end is read off the caller's thread
        assert server.connections <= 2
    finally:
        model.close()
        server.listener.close()


def test_a_body_held_open_after_done_does_not_hold_the_reply(fast_model: ModelFactory) -> None:
    server = KeepAliveServer(hold=30.0)
    model = fast_model(None, base_url=server.base_url, timeout_seconds=60.0)
    try:
        assert ask(model, USER, [], deadline=time.monotonic() + 10).content == "hi"
        assert ask(model, USER, [], deadline=time.monotonic() + 10).content == "hi"
        assert server.connections == 2  # the held connection was not waited for
    finally:
        model.close()
        server.listener.close()


def test_a_call_given_up_on_is_not_retried(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    """The deadline passed while the server was slow to refuse: the abandoned call used to
    retry behind the caller's back (another request, and a retry line after the stop)."""
    busy = [1.0, _whole(b"503 Busy", b"application/json", b"{}", b"retry-after: 0")]
    server = raw_server(busy, [STREAM_HEAD, _event({"content": "late"}, finish_reason="stop")])
    retries: list[int] = []
    model = fast_model(None, base_url=server.base_url, on_retry=lambda a, _, w: retries.append(a))
    with pytest.raises(DeadlineReached):
        ask(model, USER, [], deadline=time.monotonic() + 0.2)
    time.sleep(2.0)  # the refusal comes at 1 s; a retry would follow at once
    assert (server.requests, retries) == (1, [])


def _endless(head: bytes) -> Callable[[], Writes]:
    return lambda: itertools.chain([head], itertools.repeat(b"x" * 65536))


@pytest.mark.parametrize("status", [b"200 OK", b"503 Busy"])
def test_an_endless_whole_body_is_cut_off(
    fast_model: ModelFactory, raw_server: ServerFactory, status: bytes
) -> None:
    """A body without an event stream was read whole, however long: memory ran out first."""
    head = (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n"
    )
    server = raw_server(_endless(head))
    model = fast_model(None, base_url=server.base_url, max_retries=0)
    with pytest.raises(ModelError, match="an answer longer than 32 MB"):
        ask(model, USER, [], deadline=time.monotonic() + 20)


def test_a_whole_body_that_trickles_stalls_out(
    fast_model: ModelFactory, raw_server: ServerFactory
) -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{"
    server = raw_server(lambda: itertools.chain([head], itertools.cycle([b" ", 0.1])))
    model = fast_model(None, base_url=server.base_url, max_retries=0, timeout_seconds=0.5)
    with pytest.raises(ModelError, match=r"the answer's body took over 0\.5s") as caught:
        ask(model, USER, [], deadline=time.monotonic() + 20)
    assert "TILTH_MODEL_TIMEOUT_SECONDS" in (caught.value.hint or "")
