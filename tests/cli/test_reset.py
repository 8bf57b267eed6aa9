"""``tilth reset`` through the real CLI: confirmation, teardown, partial state, locks."""

from __future__ import annotations

import os
import pty
import re
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from tests.lock_holder import held_elsewhere
from tests.stdin_wait import wait_reading_stdin
from tests.warm_cli import shared
from tilth import git
from tilth.git import worktrees as git_worktrees
from tilth.session.store import Session

RunCli = Callable[..., subprocess.CompletedProcess[str]]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def new_session(sessions_dir: Path, source: Path) -> Session:
    """A session as prep-feature starts one: record, start event, worktree, branch."""
    session = Session.create(sessions_dir, source)
    session.log("session_start", source=str(source), phase="prep-feature")
    worktree = git_worktrees.ensure_worktree(source, session.workspace_dir, session.branch)
    session.update_checkpoint(workspace=str(worktree), branch=session.branch)
    return session


def assert_gone(session: Session, source: Path) -> None:
    assert not session.dir.exists()
    assert not session.workspace_dir.exists()
    assert not git_worktrees.branch_exists(source, session.branch)
    listing = subprocess.run(
        ["git", "worktree", "list", "--porcelain"], cwd=source, capture_output=True, text=True
    ).stdout
    assert session.id not in listing


def assert_intact(session: Session, source: Path) -> None:
    assert session.checkpoint_path.exists()
    assert (session.workspace_dir / "README.md").exists()
    assert git_worktrees.branch_exists(source, session.branch)
    assert session.workspace_dir.resolve() in git_worktrees.worktrees(source)


# ---- non-interactive ----------------------------------------------------------------------
def test_yes_removes_worktree_branch_listing_and_dir(
    cli: RunCli, sessions_dir: Path, repo: Path
) -> None:
    session = new_session(sessions_dir, repo)
    (session.workspace_dir / "uncommitted.txt").write_text("work in progress")
    keep = new_session(sessions_dir, repo)
    result = cli("reset", session.id, "-y")
    assert result.returncode == 0, result.stderr
    assert f"reset session {session.id}" in result.stdout
    assert "reset complete" in result.stdout
    assert_gone(session, repo)
    assert_intact(keep, repo)
    # The user's own checkout is untouched.
    assert git.git("status", "--porcelain", cwd=repo) == ""
    assert git.git("rev-parse", "--abbrev-ref", "HEAD", cwd=repo).strip() == "main"


def test_reset_removes_the_sessions_stash_ref_from_the_repository(
    cli: RunCli, sessions_dir: Path, repo: Path
) -> None:
    """A restart saved the worktree's changes on refs/tilth/stash/<id>; deleting the session
    must not leave that ref behind in the user's repository."""
    session = new_session(sessions_dir, repo)
    keep = new_session(sessions_dir, repo)
    for each in (session, keep):
        (each.workspace_dir / "wip.txt").write_text("work in progress")
        git.stash(each.workspace_dir, "tilth restart", ref=git.stash_ref(each.id))
    result = cli("reset", session.id, "-y")
    assert result.returncode == 0, result.stderr
    assert f"deleted {git.stash_ref(session.id)}" in result.stdout
    refs = git.git("for-each-ref", "--format=%(refname)", "refs/tilth/", cwd=repo).split()
    assert refs == [git.stash_ref(keep.id)]


def test_without_a_terminal_and_without_yes_it_refuses(
    cli: RunCli, sessions_dir: Path, repo: Path
) -> None:
    session = new_session(sessions_dir, repo)
    result = cli("reset", session.id, input_text="y\n")
    assert result.returncode == 2
    assert "not a terminal" in result.stderr
    assert f"tilth reset {session.id} -y" in result.stderr
    assert "Traceback" not in result.stderr
    assert_intact(session, repo)


def test_no_id_resets_the_latest_and_says_so(cli: RunCli, sessions_dir: Path, repo: Path) -> None:
    older = new_session(sessions_dir, repo)
    newer = new_session(sessions_dir, repo)
    result = cli("reset", "-y")
    assert result.returncode == 0, result.stderr
    assert f"latest session is {newer.id}" in result.stderr
    assert_gone(newer, repo)
    assert_intact(older, repo)


def test_unknown_and_malformed_ids(cli: RunCli, sessions_dir: Path, repo: Path) -> None:
    session = new_session(sessions_dir, repo)
    for bad in ("20200101-000000-abcdef", "../etc", "", "nonsense"):
        result = cli("reset", bad, "-y")
        assert result.returncode == 2, (bad, result.stderr)
        assert result.stderr.startswith("error: "), result.stderr
        assert "Traceback" not in result.stderr
    assert "no session 20200101-000000-abcdef" in cli("reset", "20200101-000000-abcdef").stderr
    assert_intact(session, repo)


def test_a_directory_that_is_not_a_session_is_never_deleted(
    cli: RunCli, sessions_dir: Path, tilth_home: Path
) -> None:
    precious = sessions_dir / "Documents"
    precious.mkdir(parents=True)
    (precious / "thesis.tex").write_text("years of work")
    result = cli("reset", "Documents", "-y")
    assert result.returncode == 2
    assert "is not a session id" in result.stderr
    assert (precious / "thesis.tex").exists()


def test_no_sessions_at_all(cli: RunCli) -> None:
    result = cli("reset", "-y")
    assert result.returncode == 2
    assert "no sessions found" in result.stderr


def test_worktree_deleted_by_hand(cli: RunCli, sessions_dir: Path, repo: Path) -> None:
    session = new_session(sessions_dir, repo)
    shutil.rmtree(session.workspace_dir)
    result = cli("reset", session.id, "-y")
    assert result.returncode == 0, result.stderr
    assert "already gone" in result.stdout
    assert_gone(session, repo)


def test_branch_already_gone(cli: RunCli, sessions_dir: Path, repo: Path) -> None:
    session = new_session(sessions_dir, repo)
    git_worktrees.remove_worktree(repo, session.workspace_dir)
    git_worktrees.delete_branch(repo, session.branch)
    result = cli("reset", session.id, "-y")
    assert result.returncode == 0, result.stderr
    assert f"branch {session.branch} already gone" in result.stdout
    assert_gone(session, repo)


def test_source_repository_deleted(cli: RunCli, sessions_dir: Path, repo: Path) -> None:
    session = new_session(sessions_dir, repo)
    shutil.rmtree(repo)
    result = cli("reset", session.id, "-y")
    assert result.returncode == 0, result.stderr
    assert "is gone" in result.stdout
    assert not session.dir.exists()


def test_reset_twice(cli: RunCli, sessions_dir: Path, repo: Path) -> None:
    session = new_session(sessions_dir, repo)
    assert cli("reset", session.id, "-y").returncode == 0
    again = cli("reset", session.id, "-y")
    assert again.returncode == 2
    assert f"no session {session.id}" in again.stderr


def test_corrupt_checkpoint_warns_and_uses_the_start_event(
    cli: RunCli, sessions_dir: Path, repo: Path
) -> None:
    session = new_session(sessions_dir, repo)
    session.checkpoint_path.write_text('{"session_id": "trunc')
    result = cli("reset", session.id, "-y")
    assert result.returncode == 0, result.stderr
    assert "checkpoint.json" in result.stderr and "not valid JSON" in result.stderr
    assert "Traceback" not in result.stderr
    assert f"workspace  {repo}" in result.stdout
    assert_gone(session, repo)


def test_missing_checkpoint_and_no_events_still_resets(cli: RunCli, sessions_dir: Path) -> None:
    orphan = sessions_dir / "20200101-000000-abcdef"
    orphan.mkdir(parents=True)
    (orphan / "stray.txt").write_text("x")
    result = cli("reset", orphan.name, "-y")
    assert result.returncode == 0, result.stderr
    assert "unknown" in result.stdout
    assert not orphan.exists()


# ---- the lock -----------------------------------------------------------------------------
def test_reset_of_a_session_in_use_is_refused(cli: RunCli, sessions_dir: Path, repo: Path) -> None:
    session = new_session(sessions_dir, repo)
    with held_elsewhere(session) as pid:
        result = cli("reset", session.id, "-y")
        assert result.returncode == 2
        assert f"session {session.id} is in use by pid {pid}" in result.stderr
        assert "Traceback" not in result.stderr
        assert_intact(session, repo)
    assert cli("reset", session.id, "-y").returncode == 0
    assert_gone(session, repo)


# ---- interactive, through a pseudo-terminal -----------------------------------------------
def run_in_pty(args: list[str], answer: str | None, timeout: float = 60) -> tuple[int, str]:
    """Run the CLI on a pseudo-terminal; type ``answer`` at the ``[y/N]`` prompt.

    With ``answer`` None the child gets SIGINT at the prompt instead.
    """
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "TILTH_DEBUG"}
    child = shared().popen(args, stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    output = b""
    answered = False
    deadline = time.monotonic() + timeout
    try:
        while True:
            assert time.monotonic() < deadline, f"no exit; output so far: {output!r}"
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                if child.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every slave end is closed, the child is done
                break
            if not chunk:
                break
            output += chunk
            if not answered and b"[y/N]" in output:
                answered = True
                if answer is None:
                    wait_reading_stdin(child.pid)
                    child.send_signal(signal.SIGINT)
                else:
                    os.write(master, answer.encode() + b"\n")
        code = child.wait(timeout=30)
    finally:
        os.close(master)
        if child.poll() is None:
            child.kill()
            child.wait()
    text = ANSI.sub("", output.decode("utf-8", "replace")).replace("\r\n", "\n")
    return code, text


def test_interactive_yes_deletes(tilth_home: Path, sessions_dir: Path, repo: Path) -> None:
    session = new_session(sessions_dir, repo)
    code, text = run_in_pty(["reset", session.id], "y")
    assert code == 0, text
    prompt = next(line for line in text.splitlines() if "[y/N]" in line)
    assert session.id in prompt and str(repo) in prompt
    assert "reset complete" in text
    assert_gone(session, repo)


def test_interactive_no_aborts_and_keeps_everything(
    tilth_home: Path, sessions_dir: Path, repo: Path
) -> None:
    session = new_session(sessions_dir, repo)
    code, text = run_in_pty(["reset", session.id], "n")
    assert code == 1, text
    assert "aborted" in text
    assert "Traceback" not in text
    assert_intact(session, repo)


def test_interactive_empty_answer_means_no(
    tilth_home: Path, sessions_dir: Path, repo: Path
) -> None:
    session = new_session(sessions_dir, repo)
    code, text = run_in_pty(["reset", session.id], "")
    assert code == 1 and "aborted" in text
    assert_intact(session, repo)


def test_ctrl_c_at_the_prompt(tilth_home: Path, sessions_dir: Path, repo: Path) -> None:
    session = new_session(sessions_dir, repo)
    code, text = run_in_pty(["reset", session.id], None)
    assert code == 130, text
    assert "interrupted" in text
    assert "Traceback" not in text
    assert_intact(session, repo)
    # The lock went with the interrupted process.
    with session.lock():
        pass
