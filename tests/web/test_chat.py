"""The chat view in real Chromium: a streamed reply, hover rewind, the prompt back, escaping.

The chat session is made by ``tilth.chat.ChatEngine`` on a scripted model (one turn
that writes a file); the server runs in-process so it can be handed a scripted model
that streams its reply word by word, slowly enough for the page to show it growing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.web.sse import messages
from tests.web.support import XSS_IMG, XSS_SCRIPT, serve_in_thread, wait_for
from tests.web.test_browser import new_page, shot
from tests.web.test_browser_escaping import WATCH, no_script_ran
from tilth import chat
from tilth.config import Settings, load_settings
from tilth.model import Script, ScriptedModel
from tilth.model.base import AssistantTurn, Delta, OnDelta
from tilth.model.script import reply, tool_call
from tilth.web.app import create_app

TOKEN = "chat-test-token-123456"
FIRST = "please write hello.txt"
SECOND = f"now add goodbye.txt {XSS_SCRIPT}"
STREAMED = f"I wrote goodbye.txt for you, word by word, with {XSS_IMG} shown as text."


class SlowStream:
    """A scripted model whose reply streams with a pause between words (like a real one)."""

    def __init__(self, replies: list[Any], pause: float = 0.08) -> None:
        self.inner = ScriptedModel(Script({"*": replies}), name="chat")
        self.pause = pause

    @property
    def name(self) -> str:
        return self.inner.name

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        on_delta: OnDelta | None = None,
        on_retry: Any = None,
    ) -> AssistantTurn:
        def slow(delta: Delta) -> None:
            time.sleep(self.pause)
            if on_delta is not None:
                on_delta(delta)

        return self.inner.complete(messages, tools, on_delta=slow)


def made_chat(settings: Settings, directory: Path) -> str:
    """A chat session with one turn that wrote hello.txt; closed again."""
    model = ScriptedModel(
        Script(
            {
                "*": [
                    reply("Writing it.", tool_call("write_file", path="hello.txt", content="hi\n")),
                    reply("Done: hello.txt says hi."),
                ]
            }
        ),
        name="chat",
    )
    engine = chat.ChatEngine.start(settings, directory, model, index_in_background=False)
    engine.send(FIRST)
    engine.close()
    return engine.id


@pytest.fixture
def chat_server(tilth_home: Path, tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    directory = tmp_path / "project"
    directory.mkdir()
    settings = load_settings()
    sid = made_chat(settings, directory)
    replies = [
        reply(None, tool_call("write_file", path="goodbye.txt", content="bye\n")),
        reply(STREAMED),
    ]
    with serve_in_thread(
        lambda port: create_app(settings, TOKEN, port, chat_model=lambda: SlowStream(replies))
    ) as base:
        yield base, sid, directory


def test_a_chat_message_streams_its_reply_and_a_rewind_puts_the_prompt_back(
    browser: Any, chat_server: tuple[str, str, Path]
) -> None:
    base, sid, directory = chat_server
    page = new_page(browser)
    page.add_init_script(WATCH)
    page.goto(f"{base}/s/{sid}?token={TOKEN}")
    page.wait_for_selector("[data-test=chat-user]")
    assert page.inner_text("[data-test=chat-user]").startswith(FIRST)

    # watch the reply grow: count the distinct lengths the assistant bubble goes through
    page.fill("[data-test=composer]", SECOND)
    page.evaluate(
        """() => {
        window.__lengths = new Set();
        new MutationObserver(() => {
          const replies = document.querySelectorAll('[data-test=chat-assistant]');
          const last = replies[replies.length - 1];
          if (last) window.__lengths.add(last.textContent.length);
        }).observe(document.querySelector('[data-test=transcript]'),
                   {subtree: true, childList: true, characterData: true});
      }"""
    )
    page.click("[data-test=send]")
    page.wait_for_selector(f"[data-test=chat-assistant]:has-text({STREAMED[-20:]!r})")
    grown = page.evaluate("window.__lengths.size")
    assert grown >= 5, f"the reply arrived in {grown} piece(s), not streamed"
    assert int(page.evaluate("document.body.dataset.streamed")) >= 10
    assert (directory / "goodbye.txt").read_text() == "bye\n"
    page.wait_for_selector("[data-test=chat-user][data-turn='2']")
    assert XSS_SCRIPT in page.inner_text("[data-test=chat-user][data-turn='2']")
    assert XSS_IMG in page.inner_text("[data-test=transcript]")
    no_script_ran(page)
    shot(page, "chat")

    # hover rewind on the second message: code and conversation back to before it
    message = page.locator("[data-test=chat-user][data-turn='2']")
    message.hover()
    message.locator("[data-test=chat-rewind]").click()
    page.click("#popover [data-test=chat-rewind-both]")
    page.wait_for_selector("dialog#dialog[open]")
    assert "delete goodbye.txt" in page.inner_text("[data-test=plan-files]")
    page.click("[data-test=dialog-confirm]")
    page.wait_for_selector("#toast.show:has-text('back to before turn 2')")
    assert not (directory / "goodbye.txt").exists()
    assert (directory / "hello.txt").exists()
    # (polled from here: the page's policy forbids the eval behind wait_for_function)
    composer = page.locator("[data-test=composer]")
    wait_for(lambda: composer.input_value() == SECOND, 10, "the prompt back in the composer")
    users = page.locator("[data-test=chat-user]")
    wait_for(lambda: users.count() == 1, 10, "the transcript cut before turn 2")

    # undo the rewind: the file and the second turn come back
    page.click("[data-test=undo]")
    page.wait_for_selector("dialog#dialog[open]")
    assert "restore goodbye.txt" in page.inner_text("[data-test=plan-files]")
    page.click("[data-test=dialog-confirm]")
    page.wait_for_selector("#toast.show:has-text('undone')")
    wait_for(lambda: (directory / "goodbye.txt").exists(), 10, "goodbye.txt back after undo")
    wait_for(lambda: users.count() == 2, 10, "the second turn back after undo")
    no_script_ran(page)
    assert page.errors == []


def test_messages_api_streams_events_and_refuses_what_it_cannot_send(
    chat_server: tuple[str, str, Path],
) -> None:
    base, sid, _ = chat_server
    headers = {"Authorization": f"Bearer {TOKEN}"}
    session_dir = Path(load_settings().sessions_dir) / sid
    record = (session_dir / "checkpoint.json").read_bytes()
    log = (session_dir / "events.jsonl").read_bytes()
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        history = client.get(f"/api/sessions/{sid}/messages").json()
        # reading a chat opens no engine and writes nothing
        assert (session_dir / "checkpoint.json").read_bytes() == record
        assert (session_dir / "events.jsonl").read_bytes() == log
        assert [m["role"] for m in history["messages"]][:1] == ["user"]
        assert history["turns"][0]["turn"] == 1
        assert history["turns"][0]["checkpoint"].startswith("cp-")
        assert client.post(f"/api/sessions/{sid}/messages", json={"text": "  "}).status_code == 400
        wrong = client.post(f"/api/sessions/{sid}/messages", json={"text": 5})
        assert wrong.status_code == 400 and "must be a string" in wrong.json()["error"]

        seen: list[str] = []
        barrier = threading.Event()

        def second() -> None:
            barrier.wait(10)
            busy = client.post(f"/api/sessions/{sid}/messages", json={"text": "again"})
            seen.append(f"{busy.status_code} {busy.json()['error']}")

        other = threading.Thread(target=second)
        other.start()
        with client.stream(
            "POST", f"/api/sessions/{sid}/messages", json={"text": "add goodbye.txt"}
        ) as response:
            assert response.status_code == 200
            types = []
            for event in messages(response):
                types.append(event.data.get("type", event.event))
                if event.data.get("type") == "text":
                    barrier.set()  # a second message while this one streams
        other.join(20)
        assert types[0] == "turn_started"
        assert types.count("text") > 5
        assert "tool_started" in types and "tool_finished" in types
        assert types[-2:] == ["turn_finished", "done"]
        assert seen and seen[0].startswith("400 a turn is still running")
