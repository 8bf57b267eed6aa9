"""The differential test: rewind to checkpoints in random order, again and again.

At every checkpoint of a simulated run the tree hash, HEAD, task statuses and
event-log length are recorded. Then the test rewinds (scope ``both``) to a
random checkpoint, checks all four, and sometimes continues the run from there
with a different future, so later rewinds land on checkpoints of several
branches of history.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from tests.timeline.conftest import World
from tests.timeline.simrun import SimRun, observe
from tilth.timeline import execute_rewind, list_checkpoints, plan_rewind

ROUNDS = 16


def test_rewinding_in_random_order_restores_every_recorded_point(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone(("L1", "L1"), 1, run=False)
    session = world.session
    sim = SimRun(session, turns=1)
    sim.run(salt="first")
    rng = random.Random(7)
    visited = 0
    for round_ in range(ROUNDS):
        checkpoints = [c for c in list_checkpoints(session) if c.id in sim.seen]
        target = rng.choice(checkpoints)
        execute_rewind(session, plan_rewind(session, target, "both"))
        now, then = observe(session), sim.seen[target.id]
        assert now.head == then.head, target.id
        if then.clean or not target.gaps:
            assert now.tree == then.tree, target.id
        assert now.statuses == then.statuses, target.id
        assert now.events == then.events + 1, target.id  # plus this rewind's own event
        timeline = [c for c in list_checkpoints(session) if not c.is_before]
        assert timeline[-1].id == target.id
        visited += 1
        index = sim.index_of[target.id]
        if rng.random() < 0.6 and index + 1 < len(sim.actions):
            stop = min(len(sim.actions), index + 1 + rng.randint(1, 6))
            sim.run(start=index + 1, stop=stop, salt=f"r{round_}")
    assert visited == ROUNDS
