"""The chat view in real Chromium, as a person uses it: what they see after sending.

A model error is shown where the reply would have been (and still after a reload), the
newest message stays in view as a reply streams, and a fork shows its plan first. The
server runs in-process with a scripted model (``tests/web/test_chat.py`` does the same).
Points that need the same chat open share one page (``chat_page``): each page a test opens
costs a browser renderer of its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.web.support import XSS_IMG, serve_in_thread, wait_for
from tests.web.test_browser import new_page
from tests.web.test_browser_escaping import WATCH, no_script_ran
from tests.web.test_chat import FIRST, SlowStream, made_chat
from tilth.chat import ChatEngine
from tilth.config import load_settings
from tilth.model import Script, ScriptedModel, error
from tilth.model.script import delay, reply
from tilth.session.store import Session
from tilth.web.app import create_app

TOKEN = "chat-view-token-123456"
REFUSAL = "context length exceeded: 300000 tokens > 128000"


@contextmanager
def chat_page(
    browser: Any, tmp_path: Path, model: Any, *, long_turns: int = 0
) -> Iterator[tuple[Any, str, str]]:
    """A chat served with ``model``, open in a page once its last turn shows; yields (page,
    base, id). Behind it: one turn that wrote hello.txt, or ``long_turns`` long replies."""
    directory = tmp_path / "project"
    directory.mkdir()
    settings = load_settings()
    if long_turns:
        sid = long_chat(settings, directory, long_turns)
    else:
        sid = made_chat(settings, directory)
    with serve_in_thread(
        lambda port: create_app(settings, TOKEN, port, chat_model=lambda: model)
    ) as base:
        page = new_page(browser)
        page.add_init_script(WATCH)
        page.goto(f"{base}/s/{sid}?token={TOKEN}")
        page.wait_for_selector(f"[data-test=chat-user][data-turn='{long_turns or 1}']")
        yield page, base, sid


def send(page: Any, text: str) -> None:
    page.fill("[data-test=composer]", text)
    page.click("[data-test=send]")


def test_a_model_error_then_a_reply_with_code_read_the_same_after_a_reload(
    browser: Any, tilth_home: Path, tmp_path: Path
) -> None:
    # One page for both points (each page costs a browser renderer of its own).
    code = f"def greet(name):\n    return '<b>' + name  # {XSS_IMG}"
    answer = f"Here it is:\n\n```python\n{code}\n```\n\nThat is all."
    model = SlowStream([error(400, REFUSAL), reply(answer)], pause=0.01)
    with chat_page(browser, tmp_path, model) as (page, base, sid):
        # a model error is shown where the reply would have been, and kept with its turn
        send(page, "summarise the whole repository")
        shown = page.wait_for_selector("[data-test=chat-error]", timeout=15000)
        assert REFUSAL in shown.inner_text()
        wait_for(lambda: page.is_enabled("[data-test=send]"), 10, "the composer back")
        assert REFUSAL in page.inner_text("[data-test=chat-error]"), "gone after the refresh"

        page.goto(f"{base}/s/{sid}")
        page.wait_for_selector("[data-test=chat-user][data-turn='2']")
        after = page.locator("[data-test=chat-user][data-turn='2'] ~ [data-test=chat-error]")
        assert REFUSAL in after.inner_text(), "the error is not kept with its turn"

        # code in a reply is set as code and stays text
        send(page, "show me greet")
        page.wait_for_selector("[data-test=chat-assistant]:has-text('That is all.')")
        reply_box = page.locator("[data-test=chat-assistant]").last
        assert reply_box.locator("pre code").inner_text() == code
        assert "```" not in reply_box.inner_text()
        assert "Here it is:" in reply_box.inner_text()

        page.goto(f"{base}/s/{sid}")  # the same, read back from the conversation
        page.wait_for_selector("[data-test=chat-user][data-turn='3']")
        assert page.locator("[data-test=chat-assistant] pre code").last.inner_text() == code
        no_script_ran(page)
        assert page.errors == []


def long_chat(settings: Any, directory: Path, turns: int) -> str:
    """A chat of ``turns`` turns whose replies are several lines long: taller than a window."""
    answer = "\n".join(f"line {n} of a long answer" for n in range(1, 7))
    model = ScriptedModel(Script({"*": [reply(answer) for _ in range(turns)]}), name="chat")
    engine = ChatEngine.start(settings, directory, model, index_in_background=False)
    for number in range(1, turns + 1):
        engine.send(f"question {number}")
    engine.close()
    return engine.id


def in_view(page: Any, selector: str) -> bool:
    """The last element matching ``selector`` is inside the window, above the composer."""
    box = page.locator(selector).last.bounding_box()
    composer = page.locator(".composer").bounding_box()
    return bool(
        box and composer and box["y"] >= 0 and box["y"] + box["height"] <= composer["y"] + 1
    )


def settled_in_view(page: Any, selector: str) -> None:
    """Once the turn's end has redrawn the page, the newest message is in view.

    The end of a turn refreshes the page in steps (status, then history); a look taken
    between two of them is not what a person sees, so this waits a little for the last one.
    """
    deadline = time.monotonic() + 3
    while not in_view(page, selector):
        if time.monotonic() > deadline:
            where = page.evaluate(
                "({y: scrollY, h: innerHeight, total: document.documentElement.scrollHeight})"
            )
            box = page.locator(selector).last.bounding_box()
            composer = page.locator(".composer").bounding_box()
            raise AssertionError(f"out of view: {box=} {composer=} page={where}")
        time.sleep(0.05)


def test_the_newest_message_stays_in_view(browser: Any, tilth_home: Path, tmp_path: Path) -> None:
    streamed = "\n".join(f"streamed line {n}" for n in range(1, 15))
    again = "\n".join(f"again line {n}" for n in range(1, 15))
    model = SlowStream([reply(streamed), reply(again)], pause=0.03)
    with chat_page(browser, tmp_path, model, long_turns=8) as (page, _base, _sid):
        assert page.evaluate("document.documentElement.scrollHeight > window.innerHeight")
        wait_for(lambda: in_view(page, "[data-test=chat-assistant]"), 5, "the last reply shown")

        send(page, "and one more")
        page.wait_for_selector("[data-test=chat-assistant]:has-text('streamed line 3')")
        assert in_view(page, "[data-test=chat-assistant]"), "the reply streams out of sight"
        page.wait_for_selector("[data-test=chat-user][data-turn='9']")
        wait_for(lambda: page.is_enabled("[data-test=send]"), 10, "the turn's end")
        settled_in_view(page, "[data-test=chat-assistant]:has-text('streamed line 14')")

        # someone reading back up while a reply streams is left where they are
        send(page, "and another")
        page.wait_for_selector("[data-test=chat-assistant]:has-text('again line 2')")
        page.evaluate("window.scrollTo(0, 0)")
        page.wait_for_selector("[data-test=chat-user][data-turn='10']")
        wait_for(lambda: page.is_enabled("[data-test=send]"), 10, "the turn's end")
        assert page.evaluate("window.scrollY") == 0
        assert page.errors == []


def test_an_opened_chat_reads_as_it_ran_says_what_it_is_about_and_forks_after_a_plan(
    browser: Any, tilth_home: Path, tmp_path: Path
) -> None:
    # One page for three points (each page costs a browser renderer of its own).
    model = ScriptedModel(Script({"*": []}), name="chat")
    with chat_page(browser, tmp_path, model) as (page, base, sid):
        # a tool call reads the same after the page refreshes as the reply stream showed
        # it (and the terminal does): what the call did, not its name
        assert "→ write_file hello.txt (1 line)" in page.inner_text("[data-test=chat-tool]")
        # the chat says what it is about, here and in the sessions list
        assert FIRST in page.inner_text("[data-test=session-title]")

        # a fork from a message shows its plan first
        message = page.locator("[data-test=chat-user][data-turn='1']")
        message.hover()
        message.locator("[data-test=chat-rewind]").click()
        page.click("#popover [data-test=chat-fork]")
        page.wait_for_selector("dialog#dialog[open]")
        assert sid in page.inner_text("[data-test=plan-headline]")
        assert "directory of its own" in (page.text_content("[data-test=plan-text]") or "")
        assert len(list((tilth_home / "sessions").iterdir())) == 1, "the dialog is a dry run"
        page.click("[data-test=dialog-confirm]")
        page.wait_for_selector("#toast.show:has-text('forked into')")
        assert len(list((tilth_home / "sessions").iterdir())) == 2

        page.goto(f"{base}/")
        row = page.locator(f"[data-test=session-row][data-session='{sid}']")
        row.wait_for()
        assert FIRST in row.locator(".about").inner_text()
        assert page.errors == []


def test_a_turn_sent_from_another_tab_can_be_stopped_here(
    browser: Any, tilth_home: Path, tmp_path: Path
) -> None:
    model = ScriptedModel(Script({"*": [delay(60, reply("never waited for"))]}), name="chat")
    with chat_page(browser, tmp_path, model) as (page, base, sid):
        assert page.is_disabled("[data-test=stop-turn]")

        def elsewhere() -> None:  # another tab, closed while its turn runs
            with httpx.Client(base_url=base, timeout=5) as client:
                headers = {"Authorization": f"Bearer {TOKEN}"}
                body = {"text": "a long job"}
                with client.stream(
                    "POST", f"/api/sessions/{sid}/messages", json=body, headers=headers
                ) as response:
                    next(response.iter_lines())

        elsewhere()
        wait_for(lambda: len(model.requests) == 1, 10, "the model call")
        page.reload()
        page.wait_for_selector("[data-test=chat-user][data-turn='2']")
        wait_for(lambda: page.is_enabled("[data-test=stop-turn]"), 10, "Stop offered")
        assert "running" in page.inner_text("[data-test=chat-status]")
        assert page.is_disabled("[data-test=send]")
        page.click("[data-test=stop-turn]")
        page.wait_for_selector("[data-test=chat-note]:has-text('interrupted')", timeout=15000)
        wait_for(lambda: page.is_enabled("[data-test=send]"), 10, "the composer back")
        assert page.is_disabled("[data-test=stop-turn]")
        assert page.errors == []


def test_a_history_that_arrives_mid_stream_does_not_hide_the_reply(
    browser: Any, tilth_home: Path, tmp_path: Path
) -> None:
    streamed = "\n".join(f"streamed line {n}" for n in range(1, 40))
    model = SlowStream([reply(streamed)], pause=0.05)
    with chat_page(browser, tmp_path, model, long_turns=2) as (page, _base, sid):
        held: list[Any] = []

        def hold(route: Any) -> None:
            if route.request.method == "GET":
                held.append(route)  # answered only once the reply streams
            else:
                route.continue_()

        page.route("**/messages", hold)
        # An event of the chat's log makes the page refresh: its history request is held.
        Session(sid, load_settings().sessions_dir / sid).log("note", text="a refresh")
        wait_for(lambda: page.wait_for_timeout(50) or held, 10, "the held history request")
        send(page, "and one more")
        page.wait_for_selector("[data-test=chat-assistant]:has-text('streamed line 3')")
        held[0].continue_()  # the old history comes back while the reply streams
        page.wait_for_timeout(300)
        page.unroute("**/messages")
        assert page.locator("[data-test=chat-assistant]:has-text('streamed line')").count() == 1
