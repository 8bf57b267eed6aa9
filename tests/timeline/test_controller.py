"""The controller is the one seam front ends use: plan, show, execute — in-process, no CLI."""

from __future__ import annotations

from collections.abc import Callable

from tests.timeline.conftest import World
from tests.timeline.simrun import observe
from tilth.config import load_settings
from tilth.timeline import TimelineController


def test_plan_then_execute_restores_the_checkpoint_and_fork_leaves_it_alone(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone()
    assert world.sim is not None
    timeline = TimelineController(world.session, load_settings())
    ids = [cp.id for cp in timeline.checkpoints().checkpoints]
    target = timeline.resolve("T-002")
    assert target.id in ids

    with timeline.writing():
        plan = timeline.plan_rewind(target, "both")
        before = observe(world.session)
        assert "commits dropped" in plan.render()
        assert observe(world.session) == before  # planning writes nothing
        timeline.execute(plan)
    now, then = observe(world.session), world.sim.seen[target.id]
    assert (now.tree, now.head, now.statuses) == (then.tree, then.head, then.statuses)

    with timeline.writing():
        child = timeline.fork(timeline.resolve("seed")).session
    assert child.id != world.session.id
    assert observe(world.session) == now
