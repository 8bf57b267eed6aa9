"""A torn intent journal is finished or cancelled by ``tilth doctor --repair`` (issue #24).

A go-back is killed for real (``TILTH_FAULT_AT``: the process SIGKILLs itself right after
its code step), then its journal is torn as a damaged disk would leave it. Every command
refuses it; the doctor names it and closes it from what survived: the operation is
finished when the whole plan and its steps are still there, cancelled otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.timeline.conftest import World
from tests.timeline.simrun import worktree_of
from tests.timeline.test_faults import OPS, _run_all
from tests.warm_cli import WarmCli
from tilth import git
from tilth.timeline import list_checkpoints
from tilth.timeline.rewind.journal import journal_path, read_operations


def _killed_rewind(world: World, warm_cli: WarmCli) -> bytes:
    """Run a rewind that dies right after changing the code; returns its (whole) journal."""
    code, _, err = _run_all(warm_cli, [(world, OPS["rewind"].args(world), "code+")])[0]
    assert code == -9, err
    return journal_path(world.session).read_bytes()


def _cli(world: World, warm_cli: WarmCli, *args: str) -> tuple[int, str, str]:
    return _run_all(warm_cli, [(world, list(args), None)])[0]


def _where(world: World) -> dict[str, Any]:
    """What a rewind changes: the code, the checkpoints and the task list."""
    worktree = worktree_of(world.session)
    return {
        "head": git.head(worktree),
        "status": git.git("status", "--porcelain", cwd=worktree),
        "checkpoints": [cp.id for cp in list_checkpoints(world.session)],
        "prd": world.session.load_prd(),
    }


def _refused_then_named(world: World, warm_cli: WarmCli, fix: str) -> None:
    code, _, err = _cli(world, warm_cli, "checkpoints", world.session.id)
    assert code != 0 and f"tilth doctor {world.session.id}" in err, err
    code, out, err = _cli(world, warm_cli, "doctor", world.session.id)
    assert code == 1, out + err
    assert "journal" in out and fix in out, out


@pytest.mark.parametrize("cut_in", ["done", "started"])
def test_a_torn_journal_that_kept_its_plan_is_finished(
    world_clone: Callable[..., World], warm_cli: WarmCli, cut_in: str
) -> None:
    undisturbed = world_clone(("L1",), 1)
    code, _, err = _run_all(warm_cli, [(undisturbed, OPS["rewind"].args(undisturbed), None)])[0]
    assert code == 0, err
    world = world_clone(("L1",), 1)
    journal = _killed_rewind(world, warm_cli)
    cut = journal.rindex(f'"{cut_in}":'.encode()) + len(cut_in) + 5  # inside its list
    journal_path(world.session).write_bytes(journal[:cut])

    _refused_then_named(world, warm_cli, "finish the interrupted rewind")
    code, out, err = _cli(world, warm_cli, "doctor", world.session.id, "--repair", "-y")
    assert code == 0, out + err
    assert "finished an interrupted rewind" in out and "torn journal" in out, out
    assert not journal_path(world.session).exists()
    assert _where(world) == _where(undisturbed)
    (op,) = [o for o in read_operations(world.session) if o["kind"] == "rewind"]
    assert op["recovered"] is True and "outcome" not in op
    code, out, err = _cli(world, warm_cli, "doctor", world.session.id)
    assert code == 0, out + err
    code, _, err = _cli(world, warm_cli, "checkpoints", world.session.id)
    assert code == 0, err


def test_a_torn_journal_that_lost_its_plan_is_cancelled_and_the_rewind_can_run_again(
    world_clone: Callable[..., World], warm_cli: WarmCli
) -> None:
    undisturbed = world_clone(("L1",), 1)
    code, _, err = _run_all(warm_cli, [(undisturbed, OPS["rewind"].args(undisturbed), None)])[0]
    assert code == 0, err
    world = world_clone(("L1",), 1)
    journal = _killed_rewind(world, warm_cli)
    journal_path(world.session).write_bytes(journal[: journal.index(b'"plan"') + 40])

    _refused_then_named(world, warm_cli, "cancel the interrupted go-back")
    code, out, err = _cli(world, warm_cli, "doctor", world.session.id, "--repair", "-y")
    assert code == 0, out + err
    assert "cancelled the interrupted go-back" in out, out
    assert not journal_path(world.session).exists()
    (op,) = [o for o in read_operations(world.session)]
    assert op["outcome"] == "abandoned" and op["reason"] == "torn journal"
    # Nothing was finished for the user: the same rewind, run again, gets there.
    code, _, err = _run_all(warm_cli, [(world, OPS["rewind"].args(world), None)])[0]
    assert code == 0, err
    # Each attempt left its undo point (a before- checkpoint); the timeline is the same.
    now, expected = _where(world), _where(undisturbed)
    assert now.pop("checkpoints")[:-2] == expected.pop("checkpoints")[:-1]
    assert now == expected
