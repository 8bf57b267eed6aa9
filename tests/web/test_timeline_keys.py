"""A run session's menus in real Chromium, by keyboard only: Restart ▾ and ⟲ open with
Enter, move with the arrows, close with Escape, and the focus comes back to the button."""

from __future__ import annotations

from typing import Any

from tests.web.support import Built, serve
from tests.web.test_browser import new_page, open_session
from tests.web.test_chat_keys import focused, tab_to


def test_restart_and_rewind_menus_by_keyboard(browser: Any, built: Built) -> None:
    with serve(built.env) as served:
        page = new_page(browser)
        open_session(page, served, built.id)

        tab_to(page, "[data-test=restart-menu]:not([disabled])", tries=400)
        page.keyboard.press("Enter")
        page.wait_for_selector("#popover:not([hidden])")
        assert focused(page) == "restart-option"
        first = page.evaluate("document.activeElement.textContent")
        page.keyboard.press("ArrowDown")
        assert page.evaluate("document.activeElement.textContent") != first
        page.keyboard.press("Escape")
        page.wait_for_selector("#popover", state="hidden")
        assert focused(page) == "restart-menu"

        tab_to(page, "[data-test=turn-menu]", tries=400)
        page.keyboard.press("Enter")
        page.wait_for_selector("#popover:not([hidden])")
        assert focused(page) == "rewind-code"
        page.keyboard.press("Enter")
        page.wait_for_selector("dialog#dialog[open]")
        undo = page.locator("[data-test=plan-undo]")
        assert undo.is_visible() and "Undo button" in undo.inner_text()
        page.keyboard.press("Escape")
        page.wait_for_selector("dialog#dialog[open]", state="detached")
        assert focused(page) == "turn-menu", "the focus returns to the ⟲ that opened it"
        assert page.errors == []
