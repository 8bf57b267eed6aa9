"""Turn snapshots through the real pieces: ToolBox → Recorder → checkpoints → `tilth rewind`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import make_repo, run_cli
from tests.timeline.simrun import prep
from tests.trees import tree_hash
from tilth import git
from tilth.session.store import Session
from tilth.timeline import Recorder, list_checkpoints, resolve_checkpoint
from tilth.tools import ToolBox


class Driver:
    """Runs worker-like turns on a prepared session with the real ToolBox and Recorder."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.worktree = Path(str(session.record().workspace))
        self.recorder = Recorder(session, self.worktree)
        self.box = ToolBox(self.worktree, observer=self.recorder.observer)
        self.turns = 0
        self.trees: dict[str, str] = {}

    def turn(self, *calls: tuple[str, dict[str, str]]) -> str:
        """Run tool calls as one turn, record its checkpoint, remember the tree; returns its id."""
        self.turns += 1
        thread = self.session.threads.get("worker-T-001")
        thread.append({"role": "assistant", "content": f"turn {self.turns}"})
        for name, args in calls:
            outcome = self.box.dispatch(name, args)
            assert not outcome.is_error and not outcome.blocked, outcome.result
        thread.append({"role": "user", "content": f"result {self.turns}"})
        cp = self.recorder.turn(
            "worker", task_id="T-001", stage="implementing", turn=self.turns, label=f"t{self.turns}"
        )
        self.trees[cp.id] = tree_hash(self.worktree)
        return cp.id


def _cli(sessions_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={"TILTH_SESSIONS_DIR": str(sessions_dir), **env})


def _session(tmp_path: Path, sessions_dir: Path) -> Session:
    repo = make_repo(tmp_path / "repo", {"README.md": "# demo\n", ".gitignore": "*.log\n"})
    return prep(sessions_dir, repo, ("L1",))


def test_rewind_restores_edit_and_bash_turns_exactly(tilth_home: Path, tmp_path: Path) -> None:
    sessions_dir = tilth_home / "sessions"
    driver = Driver(_session(tmp_path, sessions_dir))
    first = driver.turn(("write_file", {"path": "src/a.py", "content": "a = 1\n"}))
    second = driver.turn(
        ("bash", {"command": "echo b > b.txt && mv src/a.py src/moved.py && rm README.md"})
    )
    third = driver.turn(("edit_file", {"path": "b.txt", "old_string": "b", "new_string": "B"}))
    cps = {cp.id: cp for cp in list_checkpoints(driver.session)}
    assert cps[first].overlay.keys() == {"src/a.py"}
    assert cps[second].overlay["README.md"] is None
    assert set(cps[second].files_changed) == {"b.txt", "src/a.py", "src/moved.py", "README.md"}
    assert any("bash may have had effects" in gap for gap in cps[second].gaps)
    dry = _cli(sessions_dir, "rewind", driver.session.id, "--to", first, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "delete  b.txt" in dry.stdout and "restore README.md" in dry.stdout
    assert "delete  src/moved.py" in dry.stdout and "restore src/a.py" in dry.stdout
    for target in (first, third, second):
        result = _cli(
            sessions_dir, "rewind", driver.session.id, "--to", target, "--scope", "code", "-y"
        )
        assert result.returncode == 0, result.stderr
        assert tree_hash(driver.worktree) == driver.trees[target], target


def test_user_edits_are_reported_kept_and_overwritten_with_force(
    tilth_home: Path, tmp_path: Path
) -> None:
    sessions_dir = tilth_home / "sessions"
    driver = Driver(_session(tmp_path, sessions_dir))
    first = driver.turn(("write_file", {"path": "notes.md", "content": "agent v1\n"}))
    driver.turn(("write_file", {"path": "notes.md", "content": "agent v2\n"}))
    (driver.worktree / "README.md").write_text("edited by me\n")
    dry = _cli(sessions_dir, "rewind", driver.session.id, "--to", first, "--dry-run")
    assert "files you changed, kept as they are" in dry.stdout
    assert "    README.md" in dry.stdout.splitlines()
    kept = _cli(sessions_dir, "rewind", driver.session.id, "--to", first, "-y")
    assert kept.returncode == 0, kept.stderr
    assert (driver.worktree / "README.md").read_text() == "edited by me\n"
    assert (driver.worktree / "notes.md").read_text() == "agent v1\n"
    forced = _cli(sessions_dir, "rewind", driver.session.id, "--to", first, "--force", "-y")
    assert forced.returncode == 0, forced.stderr
    assert "OVERWRITTEN (--force)" in forced.stdout
    assert tree_hash(driver.worktree) == driver.trees[first]


def _run_turn_in_child(session: Session, env: dict[str, str]) -> int:
    """One bash turn recorded in a separate process (so it can be killed)."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from tilth.session.store import Session\n"
        "from tilth.timeline import Recorder\n"
        "from tilth.tools import ToolBox\n"
        "s = Session(sys.argv[1], Path(sys.argv[2]))\n"
        "wt = Path(s.record().workspace)\n"
        "r = Recorder(s, wt)\n"
        "box = ToolBox(wt, observer=r.observer)\n"
        "box.dispatch('bash', {'command': 'echo killed > k.txt && rm -f README.md'})\n"
        "r.turn('worker', task_id='T-001', stage='implementing', turn=9, label='killed')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, session.id, str(session.dir)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.returncode


def test_a_kill_during_capture_leaves_a_consistent_session(
    tilth_home: Path, tmp_path: Path
) -> None:
    sessions_dir = tilth_home / "sessions"
    driver = Driver(_session(tmp_path, sessions_dir))
    first = driver.turn(("write_file", {"path": "a.txt", "content": "a\n"}))
    before = [cp.id for cp in list_checkpoints(driver.session)]
    code = _run_turn_in_child(driver.session, {"TILTH_FAULT_AT": "capture"})
    assert code == -signal.SIGKILL
    assert [cp.id for cp in list_checkpoints(driver.session)] == before, "no torn checkpoint"
    # The next process records normally, and the files of the killed turn are in it.
    assert _run_turn_in_child(driver.session, {}) == 0
    latest = list_checkpoints(driver.session)[-1]
    assert latest.label == "killed" and latest.overlay["README.md"] is None
    result = _cli(sessions_dir, "rewind", driver.session.id, "--to", first, "-y")
    assert result.returncode == 0, result.stderr
    assert tree_hash(driver.worktree) == driver.trees[first]


def test_a_kill_during_restore_is_completed_on_the_next_start(
    tilth_home: Path, tmp_path: Path
) -> None:
    sessions_dir = tilth_home / "sessions"
    driver = Driver(_session(tmp_path, sessions_dir))
    first = driver.turn(("write_file", {"path": "a.txt", "content": "a\n"}))
    driver.turn(("bash", {"command": "echo b > b.txt && echo a2 > a.txt"}))
    for step in ("code", "code+"):
        killed = _cli(
            sessions_dir,
            "rewind",
            driver.session.id,
            "--to",
            first,
            "--scope",
            "code",
            "-y",
            TILTH_FAULT_AT=step,
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        # Any next command that takes the session finishes the interrupted rewind first.
        listing = _cli(sessions_dir, "rewind", driver.session.id, "--to", first, "--dry-run")
        assert listing.returncode == 0, listing.stderr
        assert tree_hash(driver.worktree) == driver.trees[first], step
        later = resolve_checkpoint(driver.session, "latest")
        back = _cli(
            sessions_dir, "rewind", driver.session.id, "--to", later.id, "--scope", "code", "-y"
        )
        assert back.returncode == 0, back.stderr
    head = git.head(driver.worktree)
    assert head == resolve_checkpoint(driver.session, first).head
    assert (
        json.loads((driver.session.dir / "timeline" / "code-state.json").read_text())["head"]
        == head
    )
