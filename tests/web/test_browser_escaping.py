"""Model-written markup renders as text in every field a page shows, and never runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.web.support import XSS_IMG, XSS_LINK, XSS_SCRIPT, build_session, fake_model, serve
from tests.web.support import xss_team as make_xss_team
from tests.web.test_browser import new_page, shot

# Registered before any page script: records a script that ran, or one the policy blocked.
WATCH = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__violations.push(e.violatedDirective + ' ' + e.blockedURI);
});
"""


def no_script_ran(page: Any) -> None:
    assert page.evaluate("window.__tilth_xss") is None
    assert page.evaluate("window.__violations") == []
    # the markup never became elements: no images, scripts or javascript: links at all
    assert page.locator("main img, main script, main iframe").count() == 0
    assert page.locator("a[href^='javascript:' i]").count() == 0


def test_markup_in_titles_tool_arguments_verdicts_and_outputs_is_text(
    browser: Any, tmp_path: Path, tilth_home: Path
) -> None:
    team, tasks = make_xss_team()
    with fake_model(team) as model:
        built = build_session(tmp_path, model, tasks, tldr=f"feature {XSS_SCRIPT} {XSS_IMG}")
    with serve() as served:
        page = new_page(browser)
        page.add_init_script(WATCH)
        page.goto(served.url)
        page.wait_for_selector(f"[data-session='{built.id}']")
        listing = page.inner_text(f"[data-session='{built.id}']")
        assert XSS_SCRIPT in listing and XSS_IMG in listing
        no_script_ran(page)

        page.goto(f"{served.base}/s/{built.id}")
        page.wait_for_selector("body[data-loaded='1'] [data-test=task]")
        page.wait_for_selector("[data-test=feed-event]")
        page.wait_for_selector("[data-test=verdict]")
        # open every turn and every stage output so their contents are rendered too
        for summary in page.locator("details.turn > summary, details.output > summary").all():
            summary.click(position={"x": 4, "y": 4})
        page.wait_for_selector("[data-test=tool-call]")

        title = page.inner_text("[data-test=task-title]")
        assert XSS_SCRIPT in title and XSS_IMG in title and XSS_LINK in title
        assert XSS_SCRIPT in page.inner_text("[data-test=session-title]")
        verdicts = " ".join(page.locator("[data-test=verdict]").all_inner_texts())
        assert "reject" in verdicts and f"concern {XSS_SCRIPT}" in verdicts
        assert f"next {XSS_IMG}" in verdicts
        calls = " ".join(page.locator("[data-test=tool-call]").all_inner_texts())
        assert XSS_SCRIPT in calls  # the file content written by write_file
        assert "onerror" in calls  # the bash command echoing the <img> markup
        feed = page.inner_text("[data-test=feed]")
        assert "concern <script>" in feed
        criteria = page.inner_text("[data-task='T-001'] .criteria")
        assert XSS_LINK in criteria
        no_script_ran(page)
        shot(page, "escaping")

        # the dialogs show model text too (checkpoint labels, file paths): still text
        page.locator("[data-test=turn-menu]").last.click()
        page.click("#popover [data-test=rewind-both]")
        page.wait_for_selector("dialog#dialog[open]")
        no_script_ran(page)
        assert page.errors == []
