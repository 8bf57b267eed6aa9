"""The chat view in real Chromium, as a person uses it: what they see after sending.

A model error is shown where the reply would have been (and still after a reload), the
newest message stays in view as a reply streams, and a fork shows its plan first. The
server runs in-process with a scripted model (``tests/web/test_chat.py`` does the same).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.web.support import serve_in_thread, wait_for
from tests.web.test_browser import new_page
from tests.web.test_chat import made_chat
from tilth.config import load_settings
from tilth.model import Script, ScriptedModel, error
from tilth.web.app import create_app

TOKEN = "chat-view-token-123456"
REFUSAL = "context length exceeded: 300000 tokens > 128000"


@contextmanager
def chat_page(browser: Any, tmp_path: Path, model: Any) -> Iterator[tuple[Any, str, str]]:
    """A chat with one turn behind it, served with ``model``; yields (page, base, id)."""
    directory = tmp_path / "project"
    directory.mkdir()
    settings = load_settings()
    sid = made_chat(settings, directory)
    with serve_in_thread(
        lambda port: create_app(settings, TOKEN, port, chat_model=lambda: model)
    ) as base:
        page = new_page(browser)
        page.goto(f"{base}/s/{sid}?token={TOKEN}")
        page.wait_for_selector("[data-test=chat-user]")
        yield page, base, sid


def send(page: Any, text: str) -> None:
    page.fill("[data-test=composer]", text)
    page.click("[data-test=send]")


def test_a_model_error_is_shown_in_the_conversation(
    browser: Any, tilth_home: Path, tmp_path: Path
) -> None:
    model = ScriptedModel(Script({"*": [error(400, REFUSAL)]}), name="chat")
    with chat_page(browser, tmp_path, model) as (page, base, sid):
        send(page, "summarise the whole repository")
        shown = page.wait_for_selector("[data-test=chat-error]", timeout=15000)
        assert REFUSAL in shown.inner_text()
        wait_for(lambda: page.is_enabled("[data-test=send]"), 10, "the composer back")
        assert REFUSAL in page.inner_text("[data-test=chat-error]"), "gone after the refresh"

        page.goto(f"{base}/s/{sid}")
        page.wait_for_selector("[data-test=chat-user][data-turn='2']")
        after = page.locator("[data-test=chat-user][data-turn='2'] ~ [data-test=chat-error]")
        assert REFUSAL in after.inner_text(), "the error is not kept with its turn"
        assert page.errors == []
