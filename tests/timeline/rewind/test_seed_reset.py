"""``tilth reset --to-seed``: the first seed, point by point, through the real CLI."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.conftest import make_repo, run_cli_in_process
from tests.sessionview import SessionView
from tests.timeline.conftest import World
from tests.timeline.simrun import (
    PREP_TOKENS,
    SimRun,
    finish_run,
    prep,
    worktree_of,
)
from tests.trees import tree_hash
from tilth import git
from tilth.session.discovery import sessions_for
from tilth.timeline import list_checkpoints
from tilth.timeline.rewind.journal import read_operations

DERIVED = ("ledger", "progress.txt", "proposed-learnings.md", "summary.json", "chat.html")


def test_reset_to_seed_returns_every_file_to_the_post_prep_copy(
    tmp_path: Path, clean_env: Path
) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "# demo\n", ".gitignore": "*.pyc\n"})
    sessions = tmp_path / "sessions"
    session = prep(sessions, repo, ("L1", "L2"))
    worktree = worktree_of(session)
    saved = {
        name: (session.dir / name).read_bytes()
        for name in ("prd.json", "checkpoint.json", "events.jsonl", "seed-meta.json")
    }
    seed_tree, seed_head = tree_hash(worktree), git.head(worktree)
    interview = (session.dir / "threads" / "interviewer.jsonl").read_bytes()

    SimRun(session, turns=1).run()
    finish_run(session)
    (worktree / "scratch.txt").write_text("untracked leftovers\n")
    (worktree / "cache.pyc").write_text("ignored cruft\n")
    assert session.status == "all_done" and (session.dir / "ledger").is_dir()

    result = World(tmp_path, session).cli("reset", "--to-seed", session.id, "-y")
    assert result.returncode == 0, result.stderr

    # the worktree and branch: git reset --hard <seed sha> + git clean -fd (not -x)
    assert git.head(worktree) == seed_head
    assert (worktree / "cache.pyc").exists(), "ignored files are left in place (-fd, not -fdx)"
    (worktree / "cache.pyc").unlink()
    assert tree_hash(worktree) == seed_tree
    assert git.git("rev-parse", session.branch, cwd=repo).strip() == seed_head
    # prd.json, checkpoint.json, events.jsonl and seed-meta.json equal the post-prep copies
    for name, content in saved.items():
        assert (session.dir / name).read_bytes() == content, name
    cp = json.loads(saved["checkpoint.json"])
    assert cp["status"] == "prepared" and cp["tokens_used"] == PREP_TOKENS
    assert SessionView(session).types()[-1] == "seed_committed"
    assert all(t["status"] == "pending" for t in session.load_prd())
    # the run's derived files, task state and threads are gone; the interview thread stays
    for name in (*DERIVED, "tasks"):
        assert not (session.dir / name).exists(), name
    assert sorted(p.name for p in (session.dir / "threads").glob("*.jsonl")) == [
        "interviewer.jsonl"
    ]
    assert (session.dir / "threads" / "interviewer.jsonl").read_bytes() == interview
    assert [c.kind for c in list_checkpoints(session)] == ["seed"]
    # the reset is recorded in the operations log, not in events.jsonl
    ops = read_operations(session)
    assert [o["kind"] for o in ops] == ["reset_to_seed"]
    # a following `tilth run <workspace>` finds it as the workspace's prepared session
    assert [s.id for s in sessions_for(sessions, repo, ("prepared",))] == [session.id]


def test_confirmation_says_it_is_destructive_and_refuses_without_a_terminal(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone()
    before = (world.session.dir / "events.jsonl").read_bytes()
    result = world.cli("reset", "--to-seed", world.session.id)
    assert result.returncode == 2
    text = result.stdout.lower()
    assert "destructive and irreversible" in text
    assert "unrecoverable" in text
    assert "commits dropped" in text
    assert "-y" in result.stderr
    assert (world.session.dir / "events.jsonl").read_bytes() == before
    assert world.session.status == "all_done"


def test_latest_session_is_used_and_named(world_clone: Callable[..., World]) -> None:
    world = world_clone()
    result = world.cli("reset", "--to-seed", "-y")
    assert result.returncode == 0, result.stderr
    assert f"latest session is {world.session.id}" in result.stderr
    assert world.session.status == "prepared"


def _break_no_seed_committed(world: World) -> None:
    log = world.session.dir / "events.jsonl"
    lines = [ln for ln in log.read_text().splitlines(True) if '"seed_committed"' not in ln]
    log.write_text("".join(lines))


def _break_prepared_tokens(world: World) -> None:
    log = world.session.dir / "events.jsonl"
    out = []
    for line in log.read_text().splitlines(True):
        record = json.loads(line)
        if record["type"] == "session_prepared":
            record["payload"].pop("tokens_used")
            line = json.dumps(record) + "\n"
        out.append(line)
    log.write_text("".join(out))


def _break_worktree_gone(world: World) -> None:
    shutil.rmtree(world.session.workspace_dir)


def _break_worktree_unrecorded(world: World) -> None:
    world.session.update_checkpoint(workspace=None)


def _break_prd_shape(world: World) -> None:
    prd = world.session.load_prd()
    prd[1]["id"] = prd[0]["id"]
    world.session.save_prd(prd)


def _break_prd_criteria(world: World) -> None:
    prd = world.session.load_prd()
    prd[0]["acceptance_criteria"] = []
    world.session.save_prd(prd)


BREAKERS: list[tuple[Callable[[World], None], str]] = [
    (_break_no_seed_committed, "no seed_committed event"),
    (_break_prepared_tokens, "session_prepared event carrying tokens_used"),
    (_break_worktree_unrecorded, "no worktree recorded"),
    (_break_prd_shape, "duplicate task id"),
    (_break_prd_criteria, "acceptance_criteria must be a non-empty list"),
    (_break_worktree_gone, "is gone"),  # last: it cannot be undone by restoring files
]


def test_preflight_failures_change_nothing_and_point_at_reset_and_prep(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone()
    session = world.session
    saved = {
        name: (session.dir / name).read_bytes()
        for name in ("events.jsonl", "prd.json", "checkpoint.json")
    }
    checkpoints = len(list_checkpoints(session))
    for breaker, words in BREAKERS:
        breaker(world)
        broken = {name: (session.dir / name).read_bytes() for name in saved}
        result = world.cli("reset", "--to-seed", session.id, "-y")
        assert result.returncode == 1, f"{words}: {result.stdout}{result.stderr}"
        assert words in result.stderr
        assert "nothing was changed" in result.stderr
        assert f"tilth reset {session.id}" in result.stderr
        assert "tilth prep-feature" in result.stderr
        assert "Traceback" not in result.stderr
        for name, content in broken.items():
            assert (session.dir / name).read_bytes() == content, f"{words}: {name} changed"
        assert len(list_checkpoints(session)) == checkpoints
        assert (session.dir / "ledger").is_dir()
        for name, content in saved.items():
            (session.dir / name).write_bytes(content)


def test_missing_session_is_a_clean_error(world_clone: Callable[..., World]) -> None:
    world = world_clone()
    result = world.cli_here("reset", "--to-seed", "20200101-000000-abcdef", "-y")
    # Nothing to act on: exit 2, as `tilth reset` and every other verb (README, exit codes).
    assert result.returncode == 2
    assert "no session 20200101-000000-abcdef" in result.stderr
    assert "tilth prep-feature" in result.stderr and "tilth reset" in result.stderr
    plain = world.cli_here("reset", "20200101-000000-abcdef", "-y")
    assert plain.returncode == result.returncode


def test_no_session_at_all_is_the_same_usage_error(tmp_path: Path, clean_env: Path) -> None:
    result = run_cli_in_process(
        "reset", "--to-seed", "-y", env={"TILTH_SESSIONS_DIR": str(tmp_path / "none")}
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: cannot reset to seed: ")
    assert "tilth prep-feature" in result.stderr


def test_a_second_reset_is_a_no_op_that_still_succeeds(world_clone: Callable[..., World]) -> None:
    world = world_clone()
    assert world.cli("reset", "--to-seed", world.session.id, "-y").returncode == 0
    events = (world.session.dir / "events.jsonl").read_bytes()
    again = world.cli("reset", "--to-seed", world.session.id, "-y")
    assert again.returncode == 0, again.stderr
    assert "commits dropped: none" in again.stdout
    assert (world.session.dir / "events.jsonl").read_bytes() == events
    assert [o["kind"] for o in read_operations(world.session)] == ["reset_to_seed"] * 2


def test_a_forks_reset_names_its_own_branch(world_clone: Callable[..., World]) -> None:
    """A fork's copied log names the parent's branch in ``seed_committed``; the plan of its
    reset to the seed names the branch it resets, the fork's own."""
    world = world_clone()
    made = world.cli_here("fork", world.session.id, "--at", "seed", "--json")
    assert made.returncode == 0, made.stderr
    child = json.loads(made.stdout)["session_id"]

    result = world.cli_here("reset", "--to-seed", child, "--dry-run")
    assert result.returncode == 0, result.stderr
    headline = result.stdout.splitlines()[0]
    assert headline.endswith(f"on session/{child})"), headline


RECORDS_OF_THE_RESET = {
    ".lock",  # the lock the reset held (every command leaves it; .lock.pid goes)
    "timeline/events-epoch.json",  # events.jsonl was cut once more (web UI event ids)
    "timeline/operations.jsonl",  # the reset's own entry, and nothing of the run's go-backs
}


def _session_files(session_dir: Path) -> set[str]:
    return {
        str(p.relative_to(session_dir))
        for p in session_dir.rglob("*")
        if p.is_file() and "workspace" not in p.relative_to(session_dir).parts
    }


def test_reset_to_seed_leaves_no_trace_of_the_erased_run(tmp_path: Path, clean_env: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "# demo\n", ".gitignore": "*.pyc\n"})
    session = prep(tmp_path / "sessions", repo, ("L1", "L1"))
    after_prep = _session_files(session.dir)
    refs_after_prep = git.git("for-each-ref", "--format=%(refname)", cwd=repo).split()
    world = World(tmp_path, session)
    SimRun(session, turns=2).run()
    finish_run(session)
    # Go-backs leave their own traces: thread id counters, a stash, the operations log.
    turn = [c for c in list_checkpoints(session) if c.kind == "turn"][1]
    assert world.cli("rewind", session.id, "--to", turn.id, "-y").returncode == 0
    (worktree_of(session) / "mine.txt").write_text("uncommitted\n")
    assert world.cli("restart", session.id, "T-001", "-y").returncode == 0
    assert list((session.dir / "threads").glob("*.next")), "the rewind cut a thread"
    stash = git.stash_ref(session.id)
    assert git.ok("show-ref", "--verify", "--quiet", stash, cwd=repo)

    dry = world.cli("reset", "--to-seed", session.id, "--dry-run")
    assert f"deleted: {stash} (what restarts stashed)" in dry.stdout
    result = world.cli("reset", "--to-seed", session.id, "-y")
    assert result.returncode == 0, result.stderr

    assert _session_files(session.dir) == after_prep | RECORDS_OF_THE_RESET
    assert [o["kind"] for o in read_operations(session)] == ["reset_to_seed"]
    assert git.git("for-each-ref", "--format=%(refname)", cwd=repo).split() == refs_after_prep
    # Checkpoint ids go on from the seed's, as if the run never happened.
    assert not (session.dir / "timeline" / "seq").exists()
