"""A retried model call in a served chat: the turn's event stream carries a notice for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.web.sse import messages
from tests.web.support import serve
from tests.web.test_chat_shutdown import new_chat
from tilth.model import FakeServer, Script, error, reply

pytestmark = pytest.mark.timeout(120)


def test_each_retry_reaches_the_web_chat_as_a_notice(tilth_home: Path, tmp_path: Path) -> None:
    session = new_chat(tmp_path / "work")
    script = Script({"chat": [error(503, "overloaded"), error(429, "slow down"), reply("Here.")]})
    env = {"TILTH_MODEL_MAX_RETRIES": "3", "TILTH_MODEL_BACKOFF_SECONDS": "0.01"}
    with FakeServer(script) as model, serve({**model.tilth_env(worker="chat"), **env}) as served:
        with (
            served.client(timeout=60) as client,
            client.stream(
                "POST", f"/api/sessions/{session.id}/messages", json={"text": "hello"}
            ) as response,
        ):
            streamed: list[Any] = [m.data for m in messages(response)]
    retries = [d for d in streamed if d.get("type") == "notice" and d.get("kind") == "retry"]
    assert [r["text"].split(";")[-1].split(" in ")[0] for r in retries] == [
        " retry 1",
        " retry 2",
    ], streamed
    assert "HTTP 503: overloaded" in retries[0]["text"]
    finished = [d for d in streamed if d.get("type") == "turn_finished"]
    assert [d["outcome"] for d in finished] == ["done"]
