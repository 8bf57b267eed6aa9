"""A run session's menus in real Chromium, by keyboard only: Restart ▾ and ⟲ open with
Enter, move with the arrows, close with Escape, and the focus comes back to the button."""

from __future__ import annotations

from typing import Any

from tests.web.keys import close_menu, open_menu, tab_to, walk_go_back_dialog
from tests.web.support import Built, serve
from tests.web.test_browser import new_page, open_session


def test_restart_and_rewind_menus_by_keyboard(browser: Any, built: Built) -> None:
    with serve(built.env) as served:
        page = new_page(browser)
        open_session(page, served, built.id)

        tab_to(page, "[data-test=restart-menu]:not([disabled])", tries=400)
        open_menu(page, "restart-option")
        first = page.evaluate("document.activeElement.textContent")
        page.keyboard.press("ArrowDown")
        assert page.evaluate("document.activeElement.textContent") != first
        close_menu(page, "restart-menu")

        tab_to(page, "[data-test=turn-menu]", tries=400)
        open_menu(page, "rewind-code")
        walk_go_back_dialog(page, "turn-menu", "Undo button")
        assert page.errors == []
