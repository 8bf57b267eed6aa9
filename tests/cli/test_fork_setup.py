"""A fork runs TILTH_SETUP_COMMAND in its new worktree whoever makes it — ``tilth fork``,
the library's ``TimelineController.fork`` or ``tilth serve``'s API — and a failing set-up
is reported with the same words, hint and output by all three."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import tilth
from tests.agent.support import TASKS, seed_session
from tests.agent.support import tilth as run_tilth
from tests.sessionview import SessionView
from tests.web.support import serve
from tilth.errors import SetupFailed
from tilth.session.store import Session
from tilth.timeline import Recorder

MARKER = "echo forked > .setup-marker && echo set up"
FAILING = "echo building; echo 'no such package: frobnicate' >&2; exit 4"


@pytest.fixture
def parent(repo: Path, sessions_dir: Path) -> Session:
    """A prepared session with its seed checkpoint, and a setup whose output git ignores."""
    (repo / ".gitignore").write_text(".setup-marker\n")
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    Recorder(seeded.session, seeded.worktree).seed()
    return seeded.session


def settings_with(setup: str) -> tilth.Settings:
    return tilth.load_settings({**os.environ, "TILTH_SETUP_COMMAND": setup})


def child_of(sessions_dir: Path, parent: Session) -> Session:
    (child,) = [p for p in sessions_dir.iterdir() if p.is_dir() and p.name != parent.id]
    return Session.open(sessions_dir, child.name)


def assert_set_up(child: Session, workspace: Path) -> None:
    assert (workspace / ".setup-marker").read_text() == "forked\n"
    (logged,) = SessionView(child).payloads("setup")
    assert logged["why"] == "fork" and logged["ok"] is True and logged["output"] == "set up"


def test_a_library_fork_runs_the_setup_command(parent: Session, sessions_dir: Path) -> None:
    timeline = tilth.open_timeline(parent, settings_with(MARKER))
    heard: list[str] = []
    with timeline.writing():
        result = timeline.fork(timeline.resolve("seed"), on_progress=heard.append)
    assert_set_up(result.session, result.worktree)
    assert heard == [f"running TILTH_SETUP_COMMAND in {result.worktree}: {MARKER}"]


def test_a_served_fork_runs_the_setup_command(parent: Session, sessions_dir: Path) -> None:
    with serve({"TILTH_SETUP_COMMAND": MARKER}) as served:
        made = served.api("POST", f"/api/sessions/{parent.id}/fork", {"at": "seed"})
    assert made.status_code == 200, made.text
    child = Session.open(sessions_dir, made.json()["id"])
    assert_set_up(child, Path(made.json()["workspace"]))


def test_the_cli_fork_says_it_runs_the_setup_command(parent: Session, sessions_dir: Path) -> None:
    made = run_tilth("fork", parent.id, "--at", "seed", env={"TILTH_SETUP_COMMAND": MARKER})
    assert made.returncode == 0, made.stdout + made.stderr
    child = child_of(sessions_dir, parent)
    assert_set_up(child, child.workspace_dir)
    assert f"running TILTH_SETUP_COMMAND in {child.workspace_dir}: {MARKER}" in made.stderr


def _failure(child: Session, error: str, hint: str | None, output: str) -> list[str]:
    """The report with the new session's id replaced, so three forks compare equal."""
    (logged,) = SessionView(child).payloads("setup")
    assert logged["ok"] is False and logged["exit_code"] == 4
    assert child.workspace_dir.is_dir(), "the fork is kept as it was made"
    return [text.replace(child.id, "<child>") for text in (error, hint or "", output)]


def test_a_failing_setup_is_reported_alike_by_the_cli_the_library_and_the_api(
    parent: Session, sessions_dir: Path
) -> None:
    reports = []

    cli = run_tilth("fork", parent.id, "--at", "seed", env={"TILTH_SETUP_COMMAND": FAILING})
    assert cli.returncode == 2, cli.stdout + cli.stderr
    child = child_of(sessions_dir, parent)
    lines = cli.stderr.splitlines()
    error = next(ln for ln in lines if ln.startswith("error: "))[len("error: ") :]
    hint = next(ln for ln in lines if ln.startswith("hint: "))[len("hint: ") :]
    assert lines[0] == f"running TILTH_SETUP_COMMAND in {child.workspace_dir}: {FAILING}"
    shown = cli.stderr.split("\n", 1)[1].split("error: ", 1)[0].strip()
    reports.append(_failure(child, error, hint, shown))
    tilth.delete_session(child)  # so the next fork is the only other session

    timeline = tilth.open_timeline(parent, settings_with(FAILING))
    with timeline.writing(), pytest.raises(SetupFailed) as raised:
        timeline.fork(timeline.resolve("seed"))
    child = child_of(sessions_dir, parent)
    failed = raised.value
    reports.append(_failure(child, failed.message, failed.hint, failed.output))
    tilth.delete_session(child)

    with serve({"TILTH_SETUP_COMMAND": FAILING}) as served:
        answer = served.api("POST", f"/api/sessions/{parent.id}/fork", {"at": "seed"})
    assert answer.status_code == 400, answer.text
    body = answer.json()
    child = child_of(sessions_dir, parent)
    reports.append(_failure(child, body["error"], body["hint"], body["output"]))

    assert reports[0] == reports[1] == reports[2]
    error, hint, output = reports[0]
    assert error == (
        "forked into session <child>, but TILTH_SETUP_COMMAND failed in the worktree "
        "(exit 4): no such package: frobnicate"
    )
    assert "`tilth resume <child>`" in hint and "setup" in hint
    assert output.startswith("building") and output.endswith("no such package: frobnicate")
