"""A best-of-N task in real Chromium: its attempts under it with the figures, the winner and
why; "Pick this one" behind the plan and a confirmation; Undo puts the winner back."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.agent.support import Seeded
from tests.attempts.support import against_differing_team, seed_add
from tests.attempts.undecided_support import stop_mid_attempts
from tests.web.support import serve, wait_for
from tests.web.test_browser import confirm, new_page, open_session
from tilth.session.store import Session


@pytest.mark.slow
def test_attempts_are_shown_picked_and_undone(
    browser: Any, repo: Path, sessions_dir: Path, tilth_home: Path, tmp_path: Path
) -> None:
    seeded = seed_add(sessions_dir, repo)
    result = against_differing_team("run", str(repo), "--attempts", "3", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    with serve({**os.environ, "TILTH_HOME": str(tilth_home)}) as served:
        page = new_page(browser)
        open_session(page, served, seeded.session.id)
        rows = page.locator("[data-task='T-001'] [data-test=attempt]")
        assert rows.count() == 3
        states = page.locator("[data-task='T-001'] [data-test=attempt-state]").all_inner_texts()
        assert states == ["lost", "★ winner", "lost"]
        assert "passed" in rows.nth(1).inner_text() and "diff line" in rows.nth(1).inner_text()
        assert "lost to" in rows.nth(0).locator("[data-test=attempt-reason]").inner_text()
        loser = rows.nth(0).get_attribute("data-session")

        rows.nth(0).locator("[data-test=pick-attempt]").click()
        page.wait_for_selector("dialog[open]")
        assert loser in page.locator("[data-test=plan-text]").text_content()
        confirm(page)
        row = f"[data-task='T-001'] [data-test=attempt][data-session='{loser}']"
        winner = f"{row} [data-test=attempt-state]"
        wait_for(lambda: page.locator(winner).inner_text() == "★ winner", 30, "the pick")

        page.click("[data-test=undo]")
        page.wait_for_selector("dialog[open]")
        confirm(page)
        wait_for(lambda: page.locator(winner).inner_text() == "lost", 30, "the undo")
        assert page.errors == []


@pytest.mark.slow
def test_undecided_attempts_show_their_progress_marked_undecided(
    browser: Any, repo: Path, sessions_dir: Path, tilth_home: Path, tmp_path: Path
) -> None:
    """While the run is on and after a stop cut it short, each attempt shows what it did so
    far, never as a decided attempt's figures, and none offers "Pick this one"."""
    with serve({**os.environ, "TILTH_HOME": str(tilth_home)}) as served:
        page = new_page(browser)
        shown = "[data-task='T-001'] [data-test=attempt-so-far]"

        def live(seeded: Seeded, attempts: list[Session]) -> None:
            open_session(page, served, seeded.session.id)
            page.wait_for_selector(shown)
            # The page follows the running attempt: its tokens grow as it spends them.
            second = page.locator(shown).nth(1)
            wait_for(lambda: "undecided: running" in second.inner_text(), 30, "running shown")
            first_seen = attempts[1].tokens_used
            wait_for(lambda: _tokens_shown(second.inner_text()) > first_seen, 60, "a live update")

        stopped = stop_mid_attempts(repo, sessions_dir, tmp_path, during=live)
        first, second = stopped.attempts
        page.reload()
        page.wait_for_selector(f"{shown}:has-text('stopped: interrupted')", timeout=30_000)
        rows = page.locator("[data-task='T-001'] [data-test=attempt]")
        assert rows.count() == 2
        states = page.locator("[data-task='T-001'] [data-test=attempt-state]").all_inner_texts()
        assert states == ["undecided", "undecided"]
        assert page.locator("[data-task='T-001'] [data-test=attempt-figures]").count() == 0
        assert page.locator("[data-task='T-001'] [data-test=pick-attempt]").count() == 0
        done = rows.nth(0).locator("[data-test=attempt-so-far]").inner_text()
        assert "its task done, waiting for the other attempts" in done
        assert f"{first.tokens_used:,} token(s) so far" in done and "gate passed" in done
        cut = rows.nth(1).locator("[data-test=attempt-so-far]").inner_text()
        assert cut.startswith("undecided: stopped: interrupted, at ")
        assert f"{second.tokens_used:,} token(s) so far" in cut and "gate not run yet" in cut
        assert "passed ·" not in cut and "diff line" not in cut
        assert page.errors == []


def _tokens_shown(text: str) -> int:
    found = re.search(r"([\d,]+) token\(s\) so far", text)
    return int(found.group(1).replace(",", "")) if found else -1
