"""The web UI in real Chromium: rewind, restart, undo, fork and a live background resume.

Sessions come from a scripted ``tilth run``; the server is the real ``tilth serve``;
every assertion about the outcome is made on disk (files, branch head, stash).
Screenshots go to ``tests-artifacts/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.agent.support import TASKS
from tests.web.support import ARTIFACTS, Built, Served, build_session, serve, wait_for
from tilth import git
from tilth.model import FakeServer
from tilth.timeline import resolve_checkpoint
from tilth.timeline.controller import TimelineController


def shot(page: Any, name: str, *, full: bool = True) -> Path:
    """A screenshot under tests-artifacts/ (the whole page, or what the window shows)."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full)
    return path


def new_page(browser: Any) -> Any:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    return page


def open_session(page: Any, served: Served, sid: str) -> None:
    page.goto(served.url)
    page.click(f"[data-test=session-row][data-session='{sid}'] [data-test=session-link]")
    page.wait_for_selector("body[data-loaded='1'] [data-test=task]")
    assert "token=" not in page.url  # the token leaves the address bar at once


def menu_of(page: Any, cp_id: str) -> Any:
    return page.locator(f"[data-cp='{cp_id}'] [data-test=turn-menu]").first


def confirm(page: Any) -> None:
    page.click("[data-test=dialog-confirm]")
    page.wait_for_selector("dialog#dialog", state="hidden")


def toast(page: Any, expect: str) -> str:
    """Wait for a toast saying ``expect``; returns its whole text."""
    page.wait_for_selector(f"#toast.show:has-text({expect!r})")
    text: str = page.inner_text("#toast")
    return text


def test_rewind_undo_restart_and_fork_through_the_menus(browser: Any, built: Built) -> None:
    worktree = built.worktree
    shout, words = worktree / "textkit" / "shout.py", worktree / "textkit" / "words.py"
    with serve(built.env) as served:
        page = new_page(browser)
        open_session(page, served, built.id)
        shot(page, "session")

        # ---- rewind the code of a turn: T-002's planning turn, before shout.py existed
        turn = next(
            cp
            for cp in TimelineController(built.session, _settings()).checkpoints().checkpoints
            if cp.kind == "turn" and cp.task_id == "T-002" and cp.stage == "planning"
        )
        menu_of(page, turn.id).click()
        page.click("#popover [data-test=rewind-code]")
        page.wait_for_selector("dialog#dialog[open]")
        files = page.inner_text("[data-test=plan-files]")
        assert "delete textkit/shout.py" in files
        assert "words.py" not in files
        assert shout.exists()  # the dialog is only the dry run
        shot(page, "rewind-dialog")
        confirm(page)
        toast(page, "rewound code to")
        assert not shout.exists() and words.exists()
        assert git.head(worktree) == turn.head

        # ---- undo the rewind
        page.click("[data-test=undo]")
        page.wait_for_selector("dialog#dialog[open]")
        assert "restore textkit/shout.py" in page.inner_text("[data-test=plan-files]")
        assert not shout.exists()  # the dialog is the dry run
        confirm(page)
        toast(page, "undone")
        wait_for(shout.exists, 10, "shout.py back after undo")
        assert git.head(worktree) != turn.head

        # ---- restart: rewind T-001 to its code_review stage, then restart from implementing
        stage = resolve_checkpoint(built.session, "T-001/code_review")
        menu_of(page, stage.id).click()
        page.click("#popover [data-test=rewind-both]")
        page.wait_for_selector("dialog#dialog[open]")
        confirm(page)
        toast(page, "rewound code and conversation")
        status = "[data-task='T-001'] [data-test=task-status]"
        page.wait_for_selector(f"{status}:has-text('in_progress')")
        (worktree / "notes.txt").write_text("work in progress\n")
        page.click("[data-task='T-001'] [data-test=restart-menu]")
        options = page.locator("#popover [data-test=restart-option]")
        offered = [options.nth(i).get_attribute("data-stage") for i in range(options.count())]
        assert offered == ["", "implementing", "code_review"]  # whole task + completed stages
        page.click("#popover [data-test=restart-option][data-stage=implementing]")
        page.wait_for_selector("dialog#dialog[open]")
        details = page.inner_text("[data-test=plan-details]")
        assert "stages that will re-run: implementing -> code_review -> verifying" in details
        assert "commits rolled back: 2" in details
        assert f"will be saved on {git.stash_ref(built.id)}" in details
        assert "notes.txt" in page.inner_text("[data-test=plan-stash]")
        commits = page.inner_text("[data-test=plan-commits]")
        assert "task/T-001: complete code_review stage" in commits
        shot(page, "restart-dialog")
        shot(page, "restart-dialog-window", full=False)  # the one docs/serve.md shows
        confirm(page)
        toast(page, "T-001 restarted")
        assert git.head(worktree) == resolve_checkpoint(built.session, "T-001/planning").head
        assert not (worktree / "notes.txt").exists()
        saved = git.git("show", "--name-only", "--format=%s", git.stash_ref(built.id), cwd=worktree)
        assert "notes.txt" in saved
        page.wait_for_selector(f"{status}:has-text('pending')")

        # ---- fork from the seed: a new session appears in the list
        seed = resolve_checkpoint(built.session, "seed")
        menu_of(page, seed.id).click()
        page.click("#popover [data-test=fork-here]")
        page.wait_for_selector("dialog#dialog[open]")
        confirm(page)
        toast(page, "forked into")
        page.click("[data-test=toast-link]")
        page.wait_for_selector("body[data-loaded='1'] [data-test=summary]")
        child = page.inner_text("#crumb-id")
        assert child != built.id
        page.goto(served.base + "/")
        page.wait_for_selector(f"[data-session='{child}']")
        assert page.locator("[data-test=session-row]").count() == 2
        shot(page, "sessions")
        assert page.errors == []


def test_a_background_resume_shows_new_turns_without_a_reload(
    browser: Any, model: FakeServer, tmp_path: Path
) -> None:
    prepared = build_session(tmp_path, model, TASKS[:1], run=False)  # one task shows it
    with serve(prepared.env) as served:
        page = new_page(browser)
        open_session(page, served, prepared.id)
        assert page.locator("[data-test=turn]").count() == 0
        page.evaluate("window.__same_page = true")
        page.click("[data-test=resume]")
        page.wait_for_selector("[data-test=turn]", timeout=60_000)
        page.wait_for_selector("[data-test=session-status]:has-text('all_done')", timeout=60_000)
        page.wait_for_selector("[data-task='T-001'] [data-test=task-status]:has-text('done')")
        assert page.evaluate("window.__same_page") is True  # no reload happened
        assert page.locator("[data-test=turn]").count() >= 4
        assert page.locator("[data-test=feed-event]").count() > 10
        shot(page, "resumed-live")
        run = wait_for(  # the child finishes its reports after the status turns all_done
            lambda: (
                (r := served.api("GET", f"/api/sessions/{prepared.id}").json()["run"])
                and r["exit_code"] is not None
                and r
            ),
            60,
            "the background run to exit",
        )
        assert run["exit_code"] == 0
        assert (prepared.worktree / "textkit" / "words.py").exists()
        assert page.errors == []


def _settings() -> Any:
    from tilth.config import load_settings

    return load_settings()


def test_reset_to_seed_behind_the_plain_warning_then_a_tab_left_open_across_a_restart(
    browser: Any, built: Built
) -> None:
    """Reset to seed asks with the CLI's plain warning. Then the server restarts: each start
    makes a new key, so the old tab says so once, in words, instead of reconnecting for
    ever; reloading it shows a page that says the same, not JSON. (One page for both.)"""
    from tilth.timeline.rewind.seed_reset import CONFIRM_WARNING

    page = new_page(browser)
    with serve(built.env) as served:
        port = int(served.base.rsplit(":", 1)[1])
        open_session(page, served, built.id)
        page.click("[data-test=reset-seed]")
        page.wait_for_selector("dialog#dialog[open]")
        assert page.inner_text("#dialog-warning") == CONFIRM_WARNING
        assert "delete textkit/words.py" in page.inner_text("[data-test=plan-files]")
        page.click("[data-test=dialog-cancel]")  # cancelling changes nothing
        page.wait_for_selector("dialog#dialog", state="hidden")
        assert (built.worktree / "textkit" / "words.py").exists()
        page.click("[data-test=reset-seed]")
        page.wait_for_selector("dialog#dialog[open]")
        confirm(page)
        toast(page, "back at its seed")
        assert git.head(built.worktree) == built.seed_sha
        assert not (built.worktree / "textkit" / "words.py").exists()
        page.wait_for_selector("[data-test=session-status]:has-text('prepared')")
        page.wait_for_selector("#live.on")
    with serve(built.env, port=port) as again:
        assert again.base == served.base and again.url != served.url  # same port, new key
        banner = page.wait_for_selector("[data-test=stale]", timeout=20000)
        assert "was restarted" in banner.inner_text()
        assert page.inner_text("#live") == "○ disconnected"
        page.reload()
        assert "needs the key" in page.inner_text("h1")
        page.goto(again.url)  # the address it printed works in the same browser
        page.wait_for_selector(f"[data-test=session-row][data-session='{built.id}']")
    assert page.errors == []
