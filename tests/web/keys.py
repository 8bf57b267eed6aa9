"""Walking the web UI's menus and dialogs by keyboard only, as a person without a mouse would."""

from __future__ import annotations

from typing import Any


def tab_to(page: Any, selector: str, tries: int = 60) -> None:
    """Press Tab until ``selector`` has the focus (the keyboard's way there)."""
    for _ in range(tries):
        page.keyboard.press("Tab")
        if page.evaluate("(s) => document.activeElement.matches(s)", selector):
            return
    raise AssertionError(f"Tab never reached {selector}")


def focused(page: Any) -> str:
    """The ``data-test`` name of the element that has the focus."""
    return str(page.evaluate("document.activeElement.getAttribute('data-test')"))


def open_menu(page: Any, first_item: str) -> None:
    """Enter on the focused menu button: the menu opens with the focus on ``first_item``."""
    page.keyboard.press("Enter")
    page.wait_for_selector("#popover:not([hidden])")
    assert focused(page) == first_item


def close_menu(page: Any, button: str) -> None:
    """Escape: the menu closes and the focus is back on its ``button``."""
    page.keyboard.press("Escape")
    page.wait_for_selector("#popover", state="hidden")
    assert focused(page) == button


def walk_go_back_dialog(page: Any, button: str, undo_text: str) -> None:
    """Enter on the focused menu item: the dialog shows its plan with the undo line in view;
    Escape closes it and the focus returns to the menu's ``button``."""
    page.keyboard.press("Enter")
    page.wait_for_selector("dialog#dialog[open]")
    undo = page.locator("[data-test=plan-undo]")
    assert undo.is_visible() and undo_text in undo.inner_text()
    page.keyboard.press("Escape")
    page.wait_for_selector("dialog#dialog[open]", state="detached")
    # The dialog's ``close`` event, which puts the focus back, fires after ``open`` is gone:
    # wait for it (a few seconds at most) rather than read the focus in between.
    try:
        page.wait_for_function(
            "(b) => document.activeElement?.getAttribute('data-test') === b",
            arg=button,
            timeout=5000,
        )
    except Exception:
        pass  # the assertion below says what has the focus instead
    assert focused(page) == button, "the focus returns to the button that opened the menu"
