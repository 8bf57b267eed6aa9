"""A fork cancelled while its worktree checks out leaves no git running after Tilth exits.

The fork checks its worktree out in a thread beside its records (``rewind.fork_steps``).
Here a real process forks a session whose checkout is slow (a smudge filter that sleeps,
noting its pid) and is interrupted (SIGINT) meanwhile: when that process has exited, no
process of the checkout may still run, and the next command completes the fork with a
whole, clean worktree.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import make_repo, run_cli
from tilth import git

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = """
import sys
from pathlib import Path

import tilth
from tilth.git import worktrees
from tilth.session.store import Session
from tilth.timeline import Recorder, TimelineController

repo, mark = Path(sys.argv[1]), Path(sys.argv[2])
if len(sys.argv) > 3:
    from tilth.timeline.rewind import fork_steps
    fork_steps.EXIT_WAIT_SECONDS = float(sys.argv[3])
settings = tilth.load_settings()
session = Session.create(settings.sessions_dir, repo)
tree = worktrees.ensure_worktree(repo, session.workspace_dir, session.branch)
session.save_prd([{"id": "T-001", "title": "t", "description": "d", "status": "pending",
                   "acceptance_criteria": ["a"]}])
session.log("session_prepared", tokens_used=0, prd_entries=1)
session.update_checkpoint(workspace=str(tree), branch=session.branch, status="prepared")
recorder = Recorder(session, tree, settings)
start = recorder.task_start("T-001")
recorder.close()
print(session.id, flush=True)
mark.touch()  # from here on the smudge filter sleeps: the fork's checkout is slow
TimelineController(session, settings).fork(start)
print("forked", flush=True)
"""


def _record(session_dir: Path) -> dict[str, object]:
    data = json.loads((session_dir / "checkpoint.json").read_text())
    assert isinstance(data, dict)
    return data


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _interrupted_fork(
    tmp_path: Path, sleep: int, wait: float | None = None, then: int | None = None
) -> tuple[str, str, Path]:
    """A real process forks a session whose checkout's smudge filter sleeps ``sleep`` s,
    and is sent SIGINT mid-checkout (``wait``: its ``EXIT_WAIT_SECONDS``; ``then``: a
    signal sent once it waits for the checkout at exit); the parent's id, its stderr and
    the file of the filter's pids, once it exited."""
    mark, pids = tmp_path / "slow-now", tmp_path / "pids"
    repo = make_repo(
        tmp_path / "repo",
        {"README.md": "# r\n", "slow.txt": "slow\n", ".gitattributes": "slow.txt filter=slow\n"},
    )
    smudge = f"test -e {mark} && echo $$ >> {pids} && sleep {sleep}; cat"
    subprocess.run(["git", "config", "filter.slow.smudge", smudge], cwd=repo, check=True)
    script = tmp_path / "fork.py"
    script.write_text(SCRIPT)
    argv = [sys.executable, str(script), str(repo), str(mark)]
    proc = subprocess.Popen(
        argv + ([str(wait)] if wait is not None else []),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        parent = proc.stdout.readline().strip()
        assert parent, proc.stderr.read() if proc.stderr else ""
        for _ in range(400):  # the fork's checkout is under way: its smudge filter runs
            if pids.is_file() and pids.read_text().strip():
                break
            time.sleep(0.025)
        assert pids.is_file(), "the fork's checkout never ran the smudge filter"
        proc.send_signal(signal.SIGINT)  # Ctrl-C, mid-checkout
        if then is not None:
            _await_catching(proc.pid, signal.SIGTERM)  # the exit wait has begun
            proc.send_signal(then)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "forked" not in out, "the fork was not cut off"
    assert "KeyboardInterrupt" in err
    return parent, err, pids


def _await_catching(pid: int, signum: int) -> None:
    """Until process ``pid`` catches ``signum`` (its ``SigCgt`` mask in /proc)."""
    for _ in range(1200):
        with open(f"/proc/{pid}/status") as handle:
            caught = next(line for line in handle if line.startswith("SigCgt:"))
        if int(caught.split()[1], 16) & (1 << (signum - 1)):
            return
        time.sleep(0.025)
    raise AssertionError(f"process {pid} never caught signal {signum}")


def _completed_by_next_command(tilth_home: Path, parent: str) -> None:
    """The next command on the parent completes the fork with a whole, clean worktree."""
    sessions = tilth_home / "sessions"
    child = next(d.name for d in sessions.iterdir() if d.name != parent)
    assert _record(sessions / child).get("fork_incomplete") is True
    done = run_cli("checkpoints", parent)
    assert done.returncode == 0, done.stderr
    record = _record(sessions / child)
    assert "fork_incomplete" not in record
    worktree = Path(str(record["workspace"]))
    assert (worktree / "slow.txt").read_text() == "slow\n"
    assert git.git("status", "--porcelain", cwd=worktree) == ""
    assert git.git("rev-parse", "--abbrev-ref", "HEAD", cwd=worktree).strip() == f"session/{child}"


def test_a_cancelled_forks_checkout_does_not_outlive_tilth(
    tilth_home: Path, tmp_path: Path
) -> None:
    parent, err, pids = _interrupted_fork(tmp_path, sleep=3)
    running = [int(p) for p in pids.read_text().split() if _alive(int(p))]
    assert running == [], f"the fork's git still runs after Tilth exited:\n{err[-2000:]}"
    _completed_by_next_command(tilth_home, parent)


def test_a_checkout_outlasting_the_exit_wait_is_killed_and_made_again(
    tilth_home: Path, tmp_path: Path
) -> None:
    # (The filter sleeps 120 s: the process can only exit within ``communicate``'s 60 s
    # by killing the checkout.)
    parent, err, pids = _interrupted_fork(tmp_path, sleep=120, wait=0.5)
    running = [int(p) for p in pids.read_text().split() if _alive(int(p))]
    assert running == [], f"the fork's git still runs after Tilth exited:\n{err[-2000:]}"
    (tmp_path / "slow-now").unlink()  # the checkout is quick again
    _completed_by_next_command(tilth_home, parent)


def test_sigterm_during_the_exit_wait_kills_the_checkout_too(
    tilth_home: Path, tmp_path: Path
) -> None:
    # Past the run's own handlers, SIGTERM's default would end the process at once and
    # leave the git running: in the exit wait it cuts the wait as a second Ctrl-C does.
    # (The filter sleeps 120 s and the wait would be 60 s: the process can only exit within
    # ``communicate``'s 60 s by killing the checkout.)
    parent, err, pids = _interrupted_fork(tmp_path, sleep=120, then=signal.SIGTERM)
    running = [int(p) for p in pids.read_text().split() if _alive(int(p))]
    assert running == [], f"the fork's git still runs after Tilth exited:\n{err[-2000:]}"
    (tmp_path / "slow-now").unlink()
    _completed_by_next_command(tilth_home, parent)
