"""A run session's menus in real Chromium, by keyboard only: Restart ▾ and ⟲ open with
Enter, move with the arrows, close with Escape, and the focus comes back to the button —
also when the page redraws meanwhile (every new event redraws the timeline)."""

from __future__ import annotations

from typing import Any

from tests.web.keys import close_menu, focused, open_menu, tab_to, walk_go_back_dialog
from tests.web.support import Built, serve
from tests.web.test_browser import new_page, open_session

RESTART = "[data-test=restart-menu]:not([disabled])"


def redraw(page: Any, built: Built) -> None:
    """Log an event and wait until the page has drawn the timeline afresh."""
    page.evaluate("(s) => document.querySelector(s).dataset.before = '1'", RESTART)
    built.session.log("note", text="an event that redraws the page")
    page.wait_for_function("(s) => !document.querySelector(s).dataset.before", arg=RESTART)


def test_restart_and_rewind_menus_by_keyboard(browser: Any, built: Built) -> None:
    with serve(built.env) as served:
        page = new_page(browser)
        open_session(page, served, built.id)

        tab_to(page, RESTART, tries=400)
        redraw(page, built)
        assert focused(page) == "restart-menu"  # the new button took the focus over
        open_menu(page, "restart-option")
        first = page.evaluate("document.activeElement.textContent")
        page.keyboard.press("ArrowDown")
        assert page.evaluate("document.activeElement.textContent") != first
        redraw(page, built)  # the button that opened the menu is gone: its successor
        close_menu(page, "restart-menu")

        tab_to(page, "[data-test=turn-menu]", tries=400)
        open_menu(page, "rewind-code")
        walk_go_back_dialog(page, "turn-menu", "Undo button")
        assert page.errors == []
