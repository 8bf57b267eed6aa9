"""Undo: every go-back but reset --to-seed can be undone, and an undo undone is redo."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.timeline.conftest import World
from tests.timeline.simrun import fingerprint, timeline_of, worktree_of
from tilth.timeline import list_checkpoints
from tilth.timeline.controller import TimelineController


def _state(world: World) -> dict[str, Any]:
    """What a go-back changes, without the undo points and the go-back events themselves."""
    state = fingerprint(world.session)
    state["checkpoints"] = sorted(f"{c.id}.json" for c in timeline_of(world.session))
    # A thread's id floor (``.next``) only grows: ids are never reused, not even by undo.
    state["files"] = {k: v for k, v in state["files"].items() if not k.endswith(".next")}
    state["events"] = [
        {k: v for k, v in e.items() if k not in ("ts", "seq")}
        for e in state["events"]
        if e["type"] not in ("rewind", "restart", "undo", "session_resume")
    ]
    return state


def _ok(result: Any) -> str:
    assert result.returncode == 0, result.stderr
    return str(result.stdout)


def test_rewind_then_undo_is_the_state_before_and_undo_again_is_redo(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone()
    sid = world.session.id
    original = _state(world)
    out = _ok(world.cli_here("rewind", sid, "--to", "T-001/planning", "-y"))
    rewound = _state(world)
    assert rewound != original
    points = [c for c in list_checkpoints(world.session) if c.is_before]
    assert [c.kind for c in points] == ["before-rewind"]
    listing = _ok(world.cli_here("checkpoints", sid))
    assert "before-rewind" in listing and points[0].id in listing

    dry = _ok(world.cli_here("rewind", sid, "--undo", "--dry-run"))
    assert f"undo: return session {sid} to {points[0].id}" in dry
    assert "dry run: nothing was changed" in dry
    assert _state(world) == rewound

    out = _ok(world.cli_here("rewind", sid, "--undo", "-y"))
    assert _state(world) == original
    assert "redo with" in out
    _ok(world.cli_here("rewind", sid, "--undo", "-y"))  # undo the undo: redo
    assert _state(world) == rewound
    kinds = [c.kind for c in list_checkpoints(world.session) if c.is_before]
    assert kinds == ["before-rewind", "before-undo", "before-undo"]


def test_undo_of_a_code_rewind_gives_back_the_users_edits_and_drops_the_note(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone()
    sid = world.session.id
    worktree = worktree_of(world.session)
    (worktree / "mine.txt").write_text("my own file\n")
    original = _state(world)
    _ok(world.cli_here("rewind", sid, "--to", "T-001", "--scope", "code", "--force", "-y"))
    assert not (worktree / "mine.txt").exists()
    _ok(world.cli_here("rewind", sid, "--undo", "-y"))
    assert (worktree / "mine.txt").read_text() == "my own file\n"
    assert _state(world) == original


def test_restart_is_undone_with_its_uncommitted_changes(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone(("L1",), 1)
    sid = world.session.id
    readme = worktree_of(world.session) / "README.md"
    readme.write_text("edited, not committed\n")
    original = _state(world)
    original.pop("stash")
    _ok(world.cli_here("restart", sid, "T-001", "--from", "implementing", "-y"))
    assert readme.read_text() != "edited, not committed\n"
    _ok(world.cli_here("rewind", sid, "--undo", "-y"))
    assert readme.read_text() == "edited, not committed\n"
    now = _state(world)
    now.pop("stash")
    assert now == original


def test_an_older_undo_point_can_be_named_and_a_plain_checkpoint_cannot(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone()
    sid = world.session.id
    _ok(world.cli_here("rewind", sid, "--to", "T-002", "-y"))
    first = _state(world)
    _ok(world.cli_here("rewind", sid, "--to", "T-001/planning", "--scope", "code", "-y"))
    points = [c.id for c in list_checkpoints(world.session) if c.is_before]
    _ok(world.cli_here("rewind", sid, "--undo", "--to", points[-1], "-y"))
    assert _state(world) == first
    wrong = world.cli_here("rewind", sid, "--undo", "--to", "T-001")
    assert wrong.returncode == 2 and "not an undo point" in wrong.stderr


def test_reset_to_seed_cannot_be_undone(world_clone: Callable[..., World]) -> None:
    world = world_clone(("L1",), 1)
    sid = world.session.id
    _ok(world.cli_here("rewind", sid, "--to", "T-001/planning", "-y"))
    _ok(world.cli_here("reset", "--to-seed", sid, "-y"))
    assert not [c for c in list_checkpoints(world.session) if c.is_before]
    assert not (world.session.dir / "timeline" / "undo").exists() or not any(
        (world.session.dir / "timeline" / "undo").iterdir()
    )
    nothing = world.cli_here("rewind", sid, "--undo", "-y")
    assert nothing.returncode == 2 and "nothing to undo" in nothing.stderr


def test_dry_run_changes_nothing_for_every_verb(world_clone: Callable[..., World]) -> None:
    world = world_clone(("L1",), 1)
    sid = world.session.id
    before = fingerprint(world.session)
    sessions = sorted(p.name for p in world.sessions_dir.iterdir())
    cases = {
        ("restart", sid, "T-001", "--from", "implementing", "--dry-run"): "restart T-001",
        ("reset", "--to-seed", sid, "--dry-run"): "reset session",
        ("reset", sid, "--dry-run"): "reset session",
        ("fork", sid, "--at", "T-001/planning", "--dry-run"): "fork session",
        ("resume", sid, "--dry-run"): "resume session",
        ("rewind", sid, "--to", "seed", "--dry-run"): "rewind session",
        (
            "summarize",
            sid,
            "--at",
            "T-001/implementing",
            "--direction",
            "up-to",
            "--thread",
            "worker-T-001",
            "--dry-run",
        ): "summarize 4 message(s) up-to",
    }
    for args, headline in cases.items():
        result = world.cli_here(*args)
        assert result.returncode == 0, (args, result.stderr)
        assert headline in result.stdout, (args, result.stdout)
        assert "dry run: nothing was changed" in result.stdout + result.stderr, args
    assert fingerprint(world.session) == before
    assert sorted(p.name for p in world.sessions_dir.iterdir()) == sessions


def test_plans_are_json_for_a_web_api(world_clone: Callable[..., World]) -> None:
    world = world_clone(("L1",), 1)
    timeline = TimelineController(world.session)
    target = timeline.resolve("T-001/planning")
    plans = [
        timeline.plan_rewind(target, "both"),
        timeline.plan_restart("T-001", "implementing"),
        timeline.plan_reset_to_seed(),
        timeline.plan_fork(target),
    ]
    for plan in plans:
        data = json.loads(json.dumps(plan.to_dict()))
        assert data["op"] == plan.op and data["schema"] >= 2
        assert plan.render().splitlines()[0]
    with timeline.writing():
        result = timeline.execute(timeline.plan_fork(target))
    assert result.new_session_id is not None
    assert (world.sessions_dir / result.new_session_id / "checkpoint.json").is_file()
    assert json.loads(json.dumps(result.to_dict()))["op"] == "fork"


def test_an_undo_plan_counts_the_events_it_drops(world_clone: Callable[..., World]) -> None:
    """The undo cuts the log where the go-back cut it, not where its undo point stands:
    the count it reports is the number of events after that cut."""
    world = world_clone(("L1",), 1)
    timeline = TimelineController(world.session)
    with timeline.writing():
        timeline.execute(timeline.plan_rewind(timeline.resolve("T-001/planning"), "both"))
    point = [c for c in list_checkpoints(world.session) if c.is_before][-1]
    # A resumed run logs on past the undo point's own sequence number.
    while world.session.events.events()[-1].seq <= point.event_seq + 3:
        world.session.log("note", text="after the rewind")
    plan = timeline.plan_undo()
    assert plan.event_offset is not None
    with open(world.session.events.path, "rb") as log:
        log.seek(plan.event_offset)
        after_cut = sum(1 for line in log if line.strip())
    assert plan.events_dropped == after_cut == sum(plan.event_types.values())
    assert f"events: {after_cut} dropped" in plan.render()
