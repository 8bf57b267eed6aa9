"""The web chat in real Chromium, by keyboard: Markdown, menus, dialogs, a refused message,
the badge, a chat the page lets go of between turns, and a phone-sized window."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.web.keys import close_menu, focused, open_menu, tab_to, walk_go_back_dialog
from tests.web.test_browser_escaping import no_script_ran
from tests.web.test_chat_view import chat_page, send
from tilth.chat import ChatEngine
from tilth.config import load_settings
from tilth.model import Script, ScriptedModel, tool_call
from tilth.model.script import reply
from tilth.session.store import Session

MARKDOWN = (
    "## Done\n\nIt is **bold** and `code`, never <script>alert(1)</script>.\n\n"
    "| file | lines |\n|---|---|\n| a.txt | 1 |\n"
)
TWO_CALLS = reply(
    None,
    tool_call("write_file", path="a.txt", content="a\n"),
    tool_call("bash", command="echo second-result"),
)


def test_markdown_results_beside_calls_and_keyboard_menus(
    browser: Any, tilth_home: Path, tmp_path: Path
) -> None:
    model = ScriptedModel(Script({"*": [TWO_CALLS, reply(MARKDOWN)]}), name="chat")
    with chat_page(browser, tmp_path, model) as (page, _, sid):
        send(page, "make two things")
        page.wait_for_selector("[data-test=chat-assistant] h2", timeout=20000)
        reply_box = page.locator("[data-test=chat-assistant]").last
        assert reply_box.locator("strong").inner_text() == "bold"
        assert reply_box.locator("table td").first.inner_text() == "a.txt"
        assert "<script>alert(1)</script>" in reply_box.inner_text()
        no_script_ran(page)
        # each tool result right under its own call
        lines = page.locator(
            "[data-test=chat-tool], [data-test=chat-tool-result]"
        ).all_inner_texts()
        joined = [line.strip() for line in lines]
        first = next(i for i, t in enumerate(joined) if t.startswith("→ write_file a.txt"))
        assert joined[first + 2].startswith("→ bash: echo second-result"), joined
        assert "second-result" in joined[first + 3], joined

        # the badge says what the chat is doing now: the page let go of it after the turn
        badge = page.locator("[data-test=session-status]")
        deadline = time.monotonic() + 15
        while badge.inner_text() == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert badge.inner_text() != "running"
        settings = load_settings()
        engine = ChatEngine.resume(settings, sid, ScriptedModel(Script({"*": []})))
        engine.close()

        # keyboard only: Tab to the turn's ⟲, Enter opens the menu, Escape closes it
        tab_to(page, "[data-test=chat-rewind]")
        open_menu(page, "chat-rewind-code")
        close_menu(page, "chat-rewind")
        # again: ↓ to "conversation", Enter: the dialog shows the plan and the undo line
        open_menu(page, "chat-rewind-code")
        page.keyboard.press("ArrowDown")
        assert focused(page) == "chat-rewind-conversation"
        walk_go_back_dialog(page, "chat-rewind", "Undo")
        assert page.errors == []


def test_a_refused_message_keeps_the_prompt_and_the_sessions_list_fits_a_phone(
    browser: Any, tilth_home: Path, tmp_path: Path
) -> None:
    # One page for both points (each page costs a browser renderer of its own).
    model = ScriptedModel(Script({"*": [reply("Fine.")]}), name="chat")
    with chat_page(browser, tmp_path, model) as (page, base, sid):
        huge = "x" * 250_000  # over the engine's prompt limit
        page.evaluate("(t) => { document.querySelector('[data-test=composer]').value = t; }", huge)
        page.click("[data-test=send]")
        page.wait_for_selector("#toast:has-text('characters')", timeout=15000)
        kept = page.evaluate("document.querySelector('[data-test=composer]').value.length")
        assert kept == len(huge), "a refused message stays in the composer"
        # the terminal can take the chat now, while the page is still open
        settings = load_settings()
        engine = ChatEngine.resume(settings, sid, ScriptedModel(Script({"*": []})))
        engine.close()

        # the sessions list fits a phone; a chat recorded as running that nothing drives
        # has the badge "stopped", not "running"
        Session(sid, settings.sessions_dir / sid).update_checkpoint(status="running")
        page.set_viewport_size({"width": 420, "height": 800})
        page.goto(f"{base}/")
        page.wait_for_selector(f"[data-session='{sid}']")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 420, f"the page scrolls sideways: {width}px"
        state = page.locator(f"[data-session='{sid}'] [data-test=session-state]").inner_text()
        assert state == "stopped", state
