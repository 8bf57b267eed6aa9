"""A key split across two pieces of a stream is still filtered (SPEC §5.5, issue #24).

The web server's filter used to look at one body chunk, and the chat stream at one delta,
at a time: a key the model streams in two deltas reached the page whole once joined.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from tests.web.sse import messages
from tests.web.support import serve
from tests.web.test_chat_shutdown import new_chat
from tilth.model import FakeServer, Script, reply
from tilth.secret_filter import PLACEHOLDER, StreamScrubber
from tilth.web.scrub import ScrubResponses

KEY = "sk-split-0123456789abcdefghijklmnopqrstuvwxyz"


def test_a_key_streamed_in_two_deltas_never_reaches_the_page_whole(
    tilth_home: Path, tmp_path: Path
) -> None:
    session = new_chat(tmp_path / "work")
    # The fake server streams a reply 16 characters at a time: the key spans three deltas.
    script = Script({"chat": [reply(f"Your key is {KEY}, keep it safe.")]})
    with FakeServer(script) as model:
        env = {**model.tilth_env(worker="chat"), "TILTH_API_KEY": KEY}
        with serve(env) as served, served.client(timeout=60) as client:
            url = f"/api/sessions/{session.id}/messages"
            with client.stream("POST", url, json={"text": "hi"}) as response:
                assert response.status_code == 200
                streamed = [m.data for m in messages(response)]
    deltas = [d["text"] for d in streamed if d.get("type") == "text"]
    assert len(deltas) > 2, streamed
    joined = "".join(deltas)
    assert joined == f"Your key is {PLACEHOLDER}, keep it safe."
    assert KEY not in str(streamed)
    assert KEY[:12] not in joined  # not even the start of it, held back then dropped


async def _two_chunks() -> AsyncIterator[bytes]:
    yield b"before " + KEY[:20].encode()
    yield KEY[20:].encode() + b" after"


async def _split(request: Request) -> StreamingResponse:
    return StreamingResponse(_two_chunks(), media_type="text/plain")


def test_a_key_across_a_response_chunk_boundary_is_filtered(monkeypatch: Any) -> None:
    monkeypatch.setenv("TILTH_API_KEY", KEY)
    app = ScrubResponses(Starlette(routes=[Route("/split", _split)]))
    with TestClient(app) as client:
        body = client.get("/split").text
    assert body == f"before {PLACEHOLDER} after"


def test_the_stream_filter_passes_text_on_at_once_when_it_cannot_begin_a_key() -> None:
    stream = StreamScrubber([KEY])
    assert stream.feed("data: hello\n\n") == "data: hello\n\n"  # nothing held: SSE stays live
    assert stream.feed("then sk-spl") == "then "
    assert stream.feed("it-0") == ""
    assert stream.feed("x") == "sk-split-0x"
    assert stream.feed("tail sk") == "tail "
    assert stream.flush() == "sk"
