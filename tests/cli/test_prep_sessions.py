"""prep-feature with sessions already in flight: pickers on a pseudo-terminal, flags, non-TTY."""

from __future__ import annotations

import importlib.util
import io
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from seed.support import Terminal, cli_env, quick_script, session_dirs, write_seed

from tests.sessionview import SessionView
from tilth.config import load_settings
from tilth.errors import TilthError
from tilth.git import worktrees as git_worktrees
from tilth.model import FakeServer, Script, ScriptedModel, reply
from tilth.seed.prepare import prepare
from tilth.seed.terminal import TerminalFrontend
from tilth.session.store import Session
from tilth.ui.io import IO

RunCli = Callable[..., subprocess.CompletedProcess[str]]


def existing(source: Path, *, fail: bool = False) -> Session:
    """A session made by a real (in-process, scripted) prep: prepared, or failed mid-interview."""
    replies = [reply("hmm"), reply("hmm")] if fail else [write_seed(1)]
    quiet = IO(stdin=io.StringIO(""), stdout=io.StringIO(), stderr=io.StringIO())
    try:
        done = prepare(
            settings=load_settings(),
            source=source,
            brief="an earlier attempt",
            model=ScriptedModel(Script(replies)),
            frontend=TerminalFrontend(quiet),
        )
        return done.session
    except TilthError:
        assert fail
        found = [Session(p.name, p) for p in session_dirs(load_settings().sessions_dir)]
        return found[-1]


def assert_gone(session: Session, source: Path) -> None:
    assert not session.dir.exists()
    assert not git_worktrees.branch_exists(source, session.branch)


def new_sessions(sessions_dir: Path, *old: Session) -> list[Path]:
    return [p for p in session_dirs(sessions_dir) if p.name not in {s.id for s in old}]


def test_without_a_terminal_it_refuses_with_the_commands(
    cli: RunCli, sessions_dir: Path, repo: Path
) -> None:
    old = existing(repo)
    with FakeServer(quick_script()) as server:
        result = cli("prep-feature", str(repo), "--brief", "add it", env=cli_env(server))
    assert result.returncode == 2
    assert f"sessions/{old.id}/   prepared  T-001: add feature 1" in result.stdout
    assert f"tilth prep-feature {repo} --brief 'add it' --force" in result.stderr
    assert f"tilth prep-feature {repo} --brief 'add it' --keep-existing" in result.stderr
    assert session_dirs(sessions_dir) == [old.dir]
    assert SessionView.at(old.dir).status == "prepared"


def test_force_discards_and_keep_existing_goes_alongside(
    cli: RunCli, sessions_dir: Path, repo: Path
) -> None:
    prepared = existing(repo)
    failed = existing(repo, fail=True)
    assert SessionView.at(failed.dir).status == "failed"
    with FakeServer(Script([write_seed(1), write_seed(1)])) as server:
        forced = cli("prep-feature", str(repo), "--brief", "b", "--force", env=cli_env(server))
        assert forced.returncode == 0, forced.stderr
        assert "--force: discarding 2 session(s)" in forced.stdout
        assert_gone(prepared, repo)
        assert_gone(failed, repo)
        (first,) = session_dirs(sessions_dir)
        kept = cli(
            "prep-feature", str(repo), "--brief", "b", "--keep-existing", env=cli_env(server)
        )
    assert kept.returncode == 0, kept.stderr
    assert "prepping alongside 1 existing session(s)" in kept.stdout
    assert len(session_dirs(sessions_dir)) == 2
    assert all(SessionView.at(p).status == "prepared" for p in session_dirs(sessions_dir))
    assert first in session_dirs(sessions_dir)


def test_force_deletes_nothing_while_one_of_the_sessions_is_running(
    cli: RunCli, sessions_dir: Path, repo: Path
) -> None:
    """--force with a run of the workspace live: it refuses before discarding any session,
    not after deleting the ones that happened to come first."""
    idle = existing(repo)
    live = existing(repo)
    with FakeServer(Script([write_seed(1)])) as server, live.lock():
        forced = cli("prep-feature", str(repo), "--brief", "b", "--force", env=cli_env(server))
        assert server.requests == []
    assert forced.returncode == 2
    assert f"session {live.id} is in use by pid" in forced.stderr
    assert idle.dir.exists() and git_worktrees.branch_exists(repo, idle.branch)
    assert session_dirs(sessions_dir) == [idle.dir, live.dir]


def test_sessions_of_other_workspaces_do_not_block(
    cli: RunCli, sessions_dir: Path, repo: Path, tmp_path: Path
) -> None:
    from conftest import make_repo

    other = make_repo(tmp_path / "other")
    existing(other)
    with FakeServer(quick_script()) as server:
        result = cli("prep-feature", str(repo), "--brief", "b", env=cli_env(server))
    assert result.returncode == 0, result.stderr


# ---- pickers on a pseudo-terminal -----------------------------------------------------------
def test_picker_cancel_changes_nothing(sessions_dir: Path, repo: Path) -> None:
    old = existing(repo)
    with FakeServer(quick_script()) as server:
        term = Terminal(["prep-feature", str(repo), "--brief", "b"], cli_env(server))
        term.expect("This workspace already has a session in flight:")
        term.expect(f"sessions/{old.id}/")
        term.expect("1) run it now")
        term.expect("2) discard it and start a new prep")
        term.expect("3) start a new session (don't touch any existing sessions)")
        term.expect("0) cancel")
        term.send("0")
        code, text = term.finish()
    assert code == 0, text
    assert "cancelled" in text
    assert session_dirs(sessions_dir) == [old.dir]


def test_picker_discard_then_prep_on_the_terminal(sessions_dir: Path, repo: Path) -> None:
    old = existing(repo)
    script = Script(
        [
            reply(
                None,
                {"name": "ask_user", "arguments": {"question": "Which?", "options": ["A", "B"]}},
            ),
            write_seed(1),
        ]
    )
    with FakeServer(script) as server:
        term = Terminal(["prep-feature", str(repo)], cli_env(server))
        term.expect("0) cancel")
        term.send("7")
        term.expect("please choose 0-3")
        term.send("2")
        term.expect("this cannot be undone")
        term.expect("Discard this session? [y/N]")
        term.send("y")
        term.expect("Describe the feature or refactor")
        term.send("add a feature")
        term.expect("? Which?")
        term.expect("0) Other")
        term.send("9")
        term.expect("pick 1-2")
        term.send("0")
        term.expect("Other:")
        term.send("something else entirely")
        code, text = term.finish()
        answered = server.requests[1]["body"]["messages"][-1]["content"]
    assert code == 0, text
    assert answered == "something else entirely"
    assert_gone(old, repo)
    (fresh,) = session_dirs(sessions_dir)
    assert SessionView.at(fresh).status == "prepared"


def test_picker_start_alongside(sessions_dir: Path, repo: Path) -> None:
    old = existing(repo)
    with FakeServer(quick_script()) as server:
        term = Terminal(["prep-feature", str(repo), "--brief", "b"], cli_env(server))
        term.expect("0) cancel")
        term.send("3")
        code, text = term.finish()
    assert code == 0, text
    assert len(new_sessions(sessions_dir, old)) == 1
    assert SessionView.at(old.dir).status == "prepared"


def test_picker_run_it_now_hands_over_to_run(sessions_dir: Path, repo: Path) -> None:
    old = existing(repo)
    with FakeServer(Script([])) as server:
        term = Terminal(["prep-feature", str(repo), "--brief", "b"], cli_env(server))
        term.expect("1) run it now")
        term.send("1")
        code, text = term.finish()
    assert new_sessions(sessions_dir, old) == []
    if importlib.util.find_spec("tilth.cli.run") is None:
        assert code == 0, text
        assert f"to continue, run: tilth run {repo}" in text
    else:
        assert f"picking up prepared session {old.id}" in text  # `tilth run` took over


def test_failed_prep_is_not_offered_to_resume(sessions_dir: Path, repo: Path) -> None:
    failed = existing(repo, fail=True)
    with FakeServer(quick_script()) as server:
        term = Terminal(["prep-feature", str(repo), "--brief", "b"], cli_env(server))
        term.expect(f"sessions/{failed.id}/")
        term.expect("failed  (prep did not finish: nothing to run)")
        term.expect("1) discard it and start a new prep")
        term.expect("2) start a new session")
        term.expect("0) cancel")
        term.send("0")
        code, text = term.finish()
    assert code == 0, text
    assert "resume it" not in text and "run it now" not in text


@pytest.mark.parametrize("choice", ["1", "2"])
def test_picker_with_several_sessions(sessions_dir: Path, repo: Path, choice: str) -> None:
    old = [existing(repo), existing(repo, fail=True)]
    with FakeServer(quick_script()) as server:
        term = Terminal(["prep-feature", str(repo), "--brief", "b"], cli_env(server))
        term.expect("This workspace has 2 sessions in flight:")
        term.expect("Heads up")
        term.expect("1) discard all 2 and start a new prep")
        term.expect("2) start a new session")
        term.send(choice)
        if choice == "1":
            term.expect("Discard these sessions? [y/N]")
            term.send("y")
        code, text = term.finish()
    assert code == 0, text
    assert len(new_sessions(sessions_dir, *old)) == 1
    for session in old:
        assert session.dir.exists() == (choice == "2")


def test_declining_the_discard_confirmation_changes_nothing(sessions_dir: Path, repo: Path) -> None:
    old = existing(repo)
    with FakeServer(quick_script()) as server:
        term = Terminal(["prep-feature", str(repo), "--brief", "b"], cli_env(server))
        term.expect("2) discard it and start a new prep")
        term.send("2")
        term.expect("Discard this session? [y/N]")
        term.send("n")
        code, text = term.finish()
        assert server.requests == []
    assert code == 1, text
    assert "nothing was changed" in text and "error" not in text.lower()
    assert session_dirs(sessions_dir) == [old.dir]
    assert SessionView.at(old.dir).status == "prepared"


def test_a_torn_seed_write_of_an_existing_session_is_rolled_back(
    cli: RunCli, sessions_dir: Path, repo: Path
) -> None:
    import json
    import sys

    from seed.support import CRASHER, seed_args

    old = existing(repo)
    prd_before = (old.dir / "prd.json").read_bytes()
    crashed = subprocess.run(
        [
            sys.executable,
            "-c",
            CRASHER,
            str(old.dir),
            str(old.workspace_dir),
            "moved:2",
            json.dumps(seed_args(2)),
        ],
        capture_output=True,
        timeout=60,
    )
    assert crashed.returncode == 17
    torn = old.workspace_dir / "tests" / "test_t002_feature_2.py"
    assert torn.exists()
    with FakeServer(quick_script()) as server:
        result = cli(
            "prep-feature", str(repo), "--brief", "b", "--keep-existing", env=cli_env(server)
        )
    assert result.returncode == 0, result.stderr
    assert not torn.exists()
    assert (old.dir / "prd.json").read_bytes() == prd_before
    assert not (old.dir / ".seed-staging").exists()
