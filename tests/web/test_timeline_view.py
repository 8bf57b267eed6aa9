"""The run timeline in real Chromium while it changes: what a person opened stays open,
and a task offers a restart only once there is something to restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.web.support import Built, build_session, serve, wait_for
from tests.web.test_browser import new_page, open_session
from tilth.model import FakeServer


def test_a_tall_plan_a_narrow_feed_and_an_opened_output_on_one_page(
    browser: Any, built: Built
) -> None:
    # One page for three points (each page costs a browser renderer of its own), the window
    # resized between them; the rewind that changes the session comes last.
    with serve(built.env) as served:
        page = browser.new_context(viewport={"width": 1280, "height": 560}).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        open_session(page, served, built.id)

        # a tall plan opens at its warning with the buttons in view
        page.click("[data-test=reset-seed]")
        page.wait_for_selector("dialog#dialog[open]")
        page.wait_for_timeout(200)
        assert page.evaluate("document.getElementById('dialog').scrollHeight > innerHeight")
        for part in ("#dialog-title", "#dialog-warning", "[data-test=dialog-confirm]"):
            box = page.locator(part).bounding_box()
            assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= 560, part
        # Enter on the dialog as it opens does not erase the run
        assert page.evaluate("document.activeElement.dataset.test") == "dialog-cancel"
        page.click("[data-test=dialog-cancel]")
        page.wait_for_selector("dialog#dialog[open]", state="detached")

        # the event feed is readable in a narrow window
        page.set_viewport_size({"width": 600, "height": 900})
        page.wait_for_selector("[data-test=feed-event]")
        what = page.locator("[data-test=feed-event] .what").first.bounding_box()
        assert what is not None and what["width"] >= 400, f"the event text gets {what}"

        # an opened stage output stays open while the page follows the log
        page.set_viewport_size({"width": 1280, "height": 900})
        output = "[data-task='T-001'] [data-stage='planning'] details.output"
        page.click(f"{output} > summary")
        assert page.locator(output).get_attribute("open") is not None
        seq = page.evaluate("document.body.dataset.lastSeq")
        # something else happens to the session: the page refreshes from its event log
        done = served.api(
            "POST", f"/api/sessions/{built.id}/rewind", {"to": "T-002/planning", "scope": "code"}
        )
        assert done.status_code == 200, done.text
        wait_for(lambda: page.evaluate("document.body.dataset.lastSeq") != seq, 20, "the event")
        page.wait_for_timeout(800)  # the refresh after the burst (250 ms) and its requests
        assert page.locator(output).get_attribute("open") is not None, "closed by the refresh"
        assert errors == []


def test_a_task_that_never_started_has_nothing_to_restart(
    browser: Any, model: FakeServer, tmp_path: Path
) -> None:
    prepared = build_session(tmp_path, model, run=False)
    with serve(prepared.env) as served:
        page = new_page(browser)
        open_session(page, served, prepared.id)
        button = page.locator("[data-task='T-001'] [data-test=restart-menu]")
        assert button.is_disabled()
        assert "not started" in (button.get_attribute("title") or "")
        assert page.errors == []
