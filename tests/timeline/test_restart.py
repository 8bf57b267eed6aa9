"""``tilth restart``: from every completed stage and the whole task, via the CLI."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.lock_holder import held_elsewhere
from tests.sessionview import SessionView
from tests.timeline.conftest import World
from tests.timeline.simrun import STAGES, SimRun, timeline_of, worktree_of
from tilth import git
from tilth.session.pipelines import stages_for
from tilth.timeline import list_checkpoints, resolve_checkpoint
from tilth.timeline.rewind.journal import read_operations
from tilth.timeline.rewind.restart import completed_stages, completed_stages_by_task

TIERS = ("L2", "L1")


@pytest.fixture
def world(world_clone: Callable[..., World]) -> World:
    """The finished two-task run (an L2 task, then an L1 one), private to the test."""
    return world_clone(TIERS, 1)


def _last_event(world: World) -> dict[str, object]:
    return SessionView(world.session).records()[-1]


def _stash_subjects(world: World) -> list[str]:
    out = git.git("stash", "list", "--format=%s", cwd=worktree_of(world.session))
    return out.splitlines()


@pytest.mark.parametrize("stage", STAGES["L2"][1:])
def test_restart_from_a_stage_rolls_back_to_the_stage_before(world: World, stage: str) -> None:
    session = world.session
    previous = STAGES["L2"][STAGES["L2"].index(stage) - 1]
    target = resolve_checkpoint(session, f"T-001/{previous}")
    result = world.cli("restart", session.id, "T-001", "--from", stage, "-y")
    assert result.returncode == 0, result.stderr
    worktree = worktree_of(session)
    assert git.head(worktree) == target.head
    assert git.subject("HEAD", worktree) == f"task/T-001: complete {previous} stage"
    rerun = " -> ".join(STAGES["L2"][STAGES["L2"].index(stage) :])
    assert f"stages that will re-run: {rerun}" in result.stdout
    assert "commits rolled back:" in result.stdout
    # harness state is the stage checkpoint's, with the task pending and later tasks untouched
    statuses = {t["id"]: t["status"] for t in session.load_prd()}
    assert statuses == {"T-001": "pending", "T-002": "pending"}
    task_state = json.loads((session.tasks_dir / "T-001.json").read_text())
    assert task_state["stages_done"][-1] == previous and stage not in task_state["outputs"]
    assert not (session.tasks_dir / "T-002.json").exists()
    assert not (session.dir / "ledger" / "T-002.jsonl").exists()
    assert timeline_of(session)[-1].id == target.id
    event = _last_event(world)
    assert event["type"] == "restart"
    assert event["payload"]["task_id"] == "T-001" and event["payload"]["from"] == stage  # type: ignore[index]
    assert [o["kind"] for o in read_operations(session)] == ["restart"]


def test_full_restart_stashes_uncommitted_changes_and_resets_to_the_base(
    world: World,
) -> None:
    session = world.session
    worktree = worktree_of(session)
    (worktree / "README.md").write_text("work in progress\n")
    (worktree / "new_file.txt").write_text("untracked\n")
    base = resolve_checkpoint(session, "T-001").head
    commits = len(git.commits_between(base, git.head(worktree), worktree))
    result = world.cli("restart", session.id, "T-001", "-y")
    assert result.returncode == 0, result.stderr
    assert f"commits rolled back: {commits}" in result.stdout
    ref = f"refs/tilth/stash/{session.id}"
    assert f"2 file(s) will be saved on {ref}" in result.stdout
    assert f"git -C {worktree} cherry-pick --no-commit {ref}" in result.stdout
    assert git.head(worktree) == base
    assert not git.is_dirty(worktree)
    assert _stash_subjects(world) == [], "the user's own refs/stash is never touched"
    assert git.subject(ref, worktree).startswith("tilth restart T-001 ")
    # The confirmation's command brings the changes back.
    git.git("cherry-pick", "--no-commit", ref, cwd=worktree)
    assert (worktree / "README.md").read_text() == "work in progress\n"
    assert (worktree / "new_file.txt").read_text() == "untracked\n"
    assert {t["id"]: t["status"] for t in session.load_prd()} == {
        "T-001": "pending",
        "T-002": "pending",
    }
    assert not session.tasks_dir.exists() or not any(session.tasks_dir.glob("T-002.json"))
    assert session.status == "running", "a restarted session is resumable, never auto-run"


def test_from_the_first_stage_is_the_full_restart(world: World) -> None:
    result = world.cli("restart", world.session.id, "T-001", "--from", "brainstorming", "-y")
    assert result.returncode == 0, result.stderr
    assert git.head(worktree_of(world.session)) == resolve_checkpoint(world.session, "T-001").head
    assert "uncommitted changes: none" in result.stdout
    assert _stash_subjects(world) == []


def test_only_completed_stages_are_offered(world_clone: Callable[..., World]) -> None:
    world = world_clone(TIERS, 1, run=False)
    # run T-001 up to and including its planning stage (brainstorm, design review, planning)
    sim = SimRun(world.session, turns=1)
    planning_done = 1 + 3 * 2  # start + (turn + stage) for three stages
    sim.run(stop=planning_done)
    result = world.cli("restart", world.session.id, "T-001", "--from", "code_review", "-y")
    assert result.returncode == 2
    assert "has not completed" in result.stderr
    assert "brainstorming, design_review, planning" in result.stderr
    bogus = world.cli("restart", world.session.id, "T-001", "--from", "testing", "-y")
    assert bogus.returncode == 2 and "not a stage of its tier" in bogus.stderr
    missing = world.cli("restart", world.session.id, "T-009", "-y")
    assert missing.returncode == 2 and "no task T-009" in missing.stderr
    # What the server shows for every task at once is what restart offers for one.
    worktree = worktree_of(world.session)
    every = completed_stages_by_task(world.session, worktree)
    for task in world.session.tasks():
        stages = stages_for(task, "L1")
        one = completed_stages(world.session, task.id, stages, worktree)
        assert one == [s for s in stages if s in every.get(task.id, ())]
    assert every["T-001"] == {"brainstorming", "design_review", "planning"}


def test_refuses_while_a_run_holds_the_lock(world: World) -> None:
    head = git.head(worktree_of(world.session))
    with held_elsewhere(world.session) as pid:
        result = world.cli("restart", world.session.id, "T-001", "-y")
    assert result.returncode == 2
    assert f"session {world.session.id} is in use by pid {pid}" in result.stderr
    assert "does not look like a tilth run; not stopping it" in result.stderr
    assert git.head(worktree_of(world.session)) == head


def test_without_checkpoints_the_commit_comes_from_events_then_subjects(
    world: World,
) -> None:
    session = world.session
    worktree = worktree_of(session)
    implementing = resolve_checkpoint(session, "T-002/implementing").head
    shutil.rmtree(session.dir / "timeline" / "checkpoints")
    result = world.cli("restart", session.id, "T-002", "--from", "code_review", "-y")
    assert result.returncode == 0, result.stderr
    assert git.head(worktree) == implementing
    task_state = json.loads((session.tasks_dir / "T-002.json").read_text())
    assert "code_review" not in task_state["stages_done"]
    assert set(task_state["outputs"]) == {"planning", "implementing"}
    assert {t["id"]: t["status"] for t in session.load_prd()}["T-002"] == "pending"


def test_a_stage_commit_that_cannot_be_found_falls_back_to_the_full_restart(
    world: World,
) -> None:
    session = world.session
    worktree = worktree_of(session)
    base = resolve_checkpoint(session, "T-002").head
    # T-002 redone by hand: its planning commit lost the conventional subject, and no
    # checkpoint or stage_completed event remembers it.
    for cp in list_checkpoints(session):
        if cp.task_id == "T-002" and cp.kind != "task_start":
            (session.dir / "timeline" / "checkpoints" / f"{cp.id}.json").unlink()
    log = session.dir / "events.jsonl"
    kept = [ln for ln in log.read_text().splitlines(True) if '"stage_completed"' not in ln]
    log.write_text("".join(kept))
    git.reset_hard(worktree, base)
    for subject in ("planning notes", "task/T-002: complete implementing stage"):
        git.commit_all(worktree, subject, allow_empty=True)
    result = world.cli("restart", session.id, "T-002", "--from", "implementing", "-y")
    assert result.returncode == 0, result.stderr
    assert "warning: the commit of stage planning was not found" in result.stdout
    assert "restarting the whole task" in result.stdout
    assert git.head(worktree) == base


@contextmanager
def _running(argv: list[str], **popen: Any) -> Iterator[subprocess.Popen[str]]:
    """``argv`` running beside the test; killed if it outlives the test."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, **popen)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@contextmanager
def _live_run(
    world: World, tmp_path: Path, *, on_sigterm: bool = False, **popen: Any
) -> Iterator[subprocess.Popen[str]]:
    """A stand-in for a live ``tilth run`` of the world's session, holding its lock: a script
    named like the console script, stopped by Ctrl-C (and by SIGTERM when ``on_sigterm``, as a
    run is) with exit 130. Restarting T-001 from scratch is checked once it has gone."""
    script = tmp_path / "bin" / "tilth"
    script.parent.mkdir()
    script.write_text(HOLDER)
    session = world.session
    argv = [sys.executable, str(script), str(session.dir), session.id, str(on_sigterm)]
    with _running(argv, **popen) as holder:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield holder
    assert git.head(worktree_of(session)) == resolve_checkpoint(session, "T-001").head


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_stop_interrupts_the_live_run_then_restarts(world: World, tmp_path: Path) -> None:
    with _live_run(world, tmp_path) as holder:
        refused = world.cli("restart", world.session.id, "T-001", "--no-stop", "-y")
        assert refused.returncode == 2 and "--no-stop" in refused.stderr
        result = world.cli("restart", world.session.id, "T-001", "-y")
        assert result.returncode == 0, result.stderr
        assert f"stopped the live run of session {world.session.id} (pid {holder.pid})" in (
            result.stderr
        )
        assert holder.wait(timeout=30) == 130


def test_stop_reaches_a_run_started_in_the_background_by_a_script(
    world: World, tmp_path: Path
) -> None:
    """`tilth run . &` in a shell script starts the run with SIGINT ignored, so Ctrl-C cannot
    stop it; restart then stops it with SIGTERM, which a run takes as Ctrl-C."""
    with _live_run(world, tmp_path, on_sigterm=True, preexec_fn=_ignore_sigint) as holder:
        started = time.monotonic()
        result = world.cli("restart", world.session.id, "T-001", "-y")
        assert result.returncode == 0, result.stderr
        assert holder.wait(timeout=30) == 130
        assert time.monotonic() - started < 30, "it stopped the run, not waited it out"


def test_stop_refuses_a_lock_holder_that_is_not_tilth(world: World) -> None:
    with _running(["sleep", "60"]) as other, world.session.lock():
        # The lock file names a process that is not a tilth run.
        (world.session.dir / ".lock.pid").write_text(str(other.pid))
        result = world.cli("restart", world.session.id, "T-001", "-y")
        assert other.poll() is None, "the other process was not signalled"
    assert result.returncode == 2
    assert "does not look like a tilth run; not stopping it" in result.stderr


def test_without_a_terminal_it_asks_for_y(world: World) -> None:
    head = git.head(worktree_of(world.session))
    result = world.cli("restart", world.session.id, "T-001", "--from", "verifying")
    assert result.returncode == 2 and "-y" in result.stderr
    assert "stages that will re-run: verifying" in result.stdout
    assert git.head(worktree_of(world.session)) == head


# A stand-in for a live `tilth run`: holds the session lock until Ctrl-C, then exits 130;
# with argv[3] "True" it takes SIGTERM as Ctrl-C, as a run does (tilth.runner).
HOLDER = """
import signal, sys, time
from pathlib import Path
from tilth.session.lock import SessionLock


def interrupt(signum, frame):
    raise KeyboardInterrupt


if sys.argv[3] == "True":
    signal.signal(signal.SIGTERM, interrupt)
lock = SessionLock(Path(sys.argv[1]), sys.argv[2]).acquire()
try:  # "locked" is said inside the try: a SIGINT right after it is still handled
    print("locked", flush=True)
    time.sleep(120)
except KeyboardInterrupt:
    lock.release()
    sys.exit(130)
"""


def test_a_stage_commit_removed_from_the_branch_by_hand_is_not_put_back(
    world: World,
) -> None:
    session = world.session
    worktree = worktree_of(session)
    base = resolve_checkpoint(session, "T-002").head
    planning = resolve_checkpoint(session, "T-002/planning").head
    implementing = resolve_checkpoint(session, "T-002/implementing").head
    git.reset_hard(worktree, planning)  # the user drops implementing and later by hand
    assert git.rev_parse(implementing, worktree) == implementing  # still in the object store

    dry = world.cli("restart", session.id, "T-002", "--from", "code_review", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert (
        "the commit of stage implementing is no longer on the session branch (removed by hand); "
        "restarting the whole task"
    ) in dry.stdout
    assert "stages that will re-run: planning -> implementing" in dry.stdout
    assert git.head(worktree) == planning

    result = world.cli("restart", session.id, "T-002", "--from", "code_review", "-y")
    assert result.returncode == 0, result.stderr
    assert git.head(worktree) == base
    assert not git.is_ancestor(implementing, "HEAD", worktree)
