"""SIGKILL at every step of every go-back; the next command recovers.

Rewind, restart, reset --to-seed, undo and resume's preparation run here; fork (whose
steps make a second session) has its own case below.

Each case runs the real CLI as its own process (forked from a warm one: ``tests/warm_cli.py``)
with ``TILTH_FAULT_AT=<step>`` so the process kills itself at that step, then runs
``tilth checkpoints`` (which recovers), and compares the session with a copy where the same
operation ran undisturbed — or, when the kill came before anything changed, with the
untouched original.
Cases run two at a time. Each operation's world is prepared once and copied per kill point;
recovery runs through the CLI for two kill points and in this process for the rest.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.timeline.conftest import World
from tests.timeline.simrun import clone_world, fingerprint, worktree_of
from tests.warm_cli import WarmCli
from tilth import git
from tilth.agent.resume import failed_subject, plan_resume
from tilth.timeline import execute_rewind, plan_rewind, recover, resolve_checkpoint
from tilth.timeline.controller import TimelineController
from tilth.timeline.rewind.executor import steps_for
from tilth.timeline.rewind.journal import journal_path, read_operations
from tilth.timeline.rewind.planner import plan_undo
from tilth.timeline.rewind.restart import plan_restart
from tilth.timeline.rewind.seed_reset import plan_reset_to_seed, preflight

_OP_ID = re.compile(rb"op-\d{8}-\d{6}-[0-9a-f]{6}")
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+Z")


@dataclass
class Op:
    """One go-back command and how to plan it in-process (to learn its steps)."""

    name: str
    args: Callable[[World], list[str]]
    plan: Callable[[World], Any]
    dirty: bool = False
    prepare: Callable[[World], None] | None = None


def _rewound(world: World) -> None:
    """A rewind to undo."""
    with world.session.lock():
        target = resolve_checkpoint(world.session, "T-001/planning")
        execute_rewind(world.session, plan_rewind(world.session, target, "both"))


def _failed(world: World) -> None:
    """A failed T-001 with its FAILED placeholder commit, as the loop leaves it."""
    prd = world.session.load_prd()
    prd[0]["status"] = "failed"
    world.session.save_prd(prd)
    worktree = worktree_of(world.session)
    (worktree / "partial.py").write_text("half done\n")
    stamp = {
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    }
    saved = {k: os.environ.get(k) for k in stamp}
    os.environ.update(stamp)  # the same placeholder sha in every clone
    try:
        git.commit_all(worktree, failed_subject("T-001", "iter_cap", "task 1"), allow_empty=True)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    world.session.set_status("failed")


RESUME_PREP = (
    "import sys; from pathlib import Path; from tilth.session.store import Session; "
    "from tilth.agent.resume import prepare_resume; "
    "s = Session.open(Path(sys.argv[1]), sys.argv[2]); "
    "from tilth.timeline import open_for_writing; "
    "from tilth.timeline.record.state_capture import worktree_of; "
    "cm = open_for_writing(s, lambda m: print(m, file=sys.stderr)); cm.__enter__(); "
    "prepare_resume(s, worktree_of(s))"
)


OPS = {
    "rewind": Op(
        "rewind",
        lambda w: ["rewind", w.session.id, "--to", "T-001/planning", "-y"],
        lambda w: plan_rewind(w.session, resolve_checkpoint(w.session, "T-001/planning"), "both"),
    ),
    "rewind-code": Op(
        "rewind",
        lambda w: ["rewind", w.session.id, "--to", "T-001/planning", "--scope", "code", "-y"],
        lambda w: plan_rewind(w.session, resolve_checkpoint(w.session, "T-001/planning"), "code"),
    ),
    "reset": Op(
        "reset_to_seed",
        lambda w: ["reset", "--to-seed", w.session.id, "-y"],
        lambda w: plan_reset_to_seed(w.session, preflight(w.session)),
    ),
    "restart": Op(
        "restart",
        lambda w: ["restart", w.session.id, "T-001", "--from", "implementing", "-y"],
        lambda w: plan_restart(w.session, "T-001", "implementing", "L1"),
        dirty=True,
    ),
    "undo": Op(
        "undo",
        lambda w: ["rewind", w.session.id, "--undo", "-y"],
        lambda w: plan_undo(w.session),
        prepare=_rewound,
    ),
    "resume": Op(
        "resume",
        lambda w: ["-c", RESUME_PREP, str(w.sessions_dir), w.session.id],
        lambda w: plan_resume(w.session, worktree_of(w.session))[1],
        prepare=_failed,
    ),
}


def _normalise(value: Any) -> Any:
    """Blank what legitimately differs between two runs: op ids and stash timestamps."""
    if isinstance(value, bytes):
        return _OP_ID.sub(b"op-X", value)
    if isinstance(value, str):
        return _STAMP.sub("T", value)
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return value


def _state(world: World) -> Any:
    return _normalise(fingerprint(world.session))


def _prepare(world: World, op: Op) -> None:
    if op.prepare is not None:
        op.prepare(world)
    if op.dirty:
        (worktree_of(world.session) / "README.md").write_text("edited, not committed\n")


def _env(world: World, fault: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILTH_")}
    env["TILTH_HOME"] = str(world.root / "home")
    env["TILTH_SESSIONS_DIR"] = str(world.sessions_dir)
    if fault:
        env["TILTH_FAULT_AT"] = fault
    return env


Job = tuple[World, list[str], str | None]


def _run_all(warm: WarmCli, jobs: list[Job]) -> list[tuple[int, str, str]]:
    """Run CLI invocations as processes, two at a time (the test machine has two cores)."""
    results: list[tuple[int, str, str]] = []
    for start in range(0, len(jobs), 2):
        started = []
        for world, args, fault in jobs[start : start + 2]:
            env = _env(world, fault)
            if args[0] == "-c":
                started.append(warm.start(args[2:], env, code=args[1]))
            else:
                started.append(warm.start(args, env))
        results.extend(warm.wait(s) for s in started)
    return results


def _recover_in_process(world: World) -> str:
    with world.session.lock():
        return recover(world.session) or ""


def _copies(template: World, root: Path, count: int) -> list[World]:
    """``count`` private copies of ``template`` (as prepared for the operation) under ``root``."""
    return [
        World(root / f"copy{i}", clone_world(template.root, root / f"copy{i}", template.session))
        for i in range(count)
    ]


CLI_RECOVERS = ("journal", "finish")
"""Kill points whose recovery runs through the real CLI (``tilth checkpoints``): one before
anything changed, one at the last step. After the other kill points the same ``recover``
runs in this process, under the session lock as the CLI takes it (the CLI's part, the lock
of a killed process and the message, is proven by these two)."""


@pytest.mark.parametrize("op_key", list(OPS))
def test_sigkill_at_every_step_then_the_next_command_recovers(
    world_clone: Callable[..., World], warm_cli: WarmCli, tmp_path: Path, op_key: str
) -> None:
    op = OPS[op_key]
    template = world_clone(("L1",), 1)
    _prepare(template, op)  # once: every copy below starts from this prepared state
    steps = steps_for(op.plan(template))
    faults = ["journal", *steps]
    if op_key in ("rewind", "undo", "resume"):
        # Just after each mutation, before the journal says it is done: the step runs again.
        faults += [f"{step}+" for step in steps]

    probe, *worlds = _copies(template, tmp_path / "copies", 1 + len(faults))
    original = _state(probe)
    done = _run_all(warm_cli, [(probe, op.args(probe), None)])[0]
    assert done[0] == 0, done[2]
    expected = _state(probe)
    assert expected != original

    jobs: list[Job] = [(w, op.args(w), f) for w, f in zip(worlds, faults, strict=True)]
    killed = _run_all(warm_cli, jobs)
    for fault, (code, _, err) in zip(faults, killed, strict=True):
        assert code == -9, f"{fault}: expected SIGKILL, got {code}: {err}"
    # The next command recovers, whichever it is: `tilth checkpoints` for some kill points,
    # the same recovery in this process for the others.
    by_cli = [(w, f) for w, f in zip(worlds, faults, strict=True) if f in CLI_RECOVERS]
    assert len(by_cli) == len(CLI_RECOVERS), faults
    recovered = _run_all(warm_cli, [(w, ["checkpoints", w.session.id], None) for w, _ in by_cli])
    said: dict[str, str] = {}
    for (_, fault), (code, _, err) in zip(by_cli, recovered, strict=True):
        assert code == 0, f"{fault}: {err}"
        said[fault] = err
    for fault, world in zip(faults, worlds, strict=True):
        if fault not in said:
            said[fault] = _recover_in_process(world)
        if fault != "finish+":  # killed after the journal was cleared: nothing left to do
            assert "interrupted" in said[fault], f"{fault}: recovery said nothing: {said[fault]!r}"
        assert not journal_path(world.session).exists(), fault
        ops = [o for o in read_operations(world.session) if o["kind"] == op.name]
        assert len(ops) == 1, f"{fault}: {ops}"
        if fault == "journal":
            assert ops[0].get("outcome") == "abandoned"
            assert _state(world) == original, f"{fault}: not rolled back"
        else:
            assert ops[0]["recovered"] is (fault != "finish+")
            assert _state(world) == expected, f"{fault}: not rolled forward"


def _child_state(sessions_dir: Any, parent_id: str) -> Any:
    from pathlib import Path

    from tests.trees import tree_hash
    from tilth.session.store import Session

    children = [p for p in Path(sessions_dir).iterdir() if p.name != parent_id]
    if not children:
        return None
    (child_dir,) = children
    child = Session(child_dir.name, child_dir)
    record = child.record().to_dict()
    return {
        "incomplete": record.get("fork_incomplete", False),
        "status": record.get("status"),
        "tokens": record.get("tokens_used"),
        "tree": tree_hash(Path(record["workspace"])),
        "threads": child.threads.heads(),
        "prd": child.load_prd(),
        "events": [e.type for e in child.events.events()],
        "checkpoints": sorted(p.name for p in (child_dir / "timeline/checkpoints").iterdir()),
    }


def test_sigkill_at_every_step_of_a_fork_then_the_parents_next_command_completes_it(
    world_clone: Callable[..., World], warm_cli: WarmCli
) -> None:
    probe = world_clone(("L1",), 1)
    target = resolve_checkpoint(probe.session, "T-001/implementing")
    plan = TimelineController(probe.session).plan_fork(target)
    steps = steps_for(plan)
    faults = ["journal", *steps, *[f"{step}+" for step in steps]]
    args = ["fork", probe.session.id, "--at", "T-001/implementing"]
    parent_before = _state(probe)
    assert _run_all(warm_cli, [(probe, args, None)])[0][0] == 0
    expected = _child_state(probe.sessions_dir, probe.session.id)
    assert expected is not None and not expected["incomplete"]
    worlds = [world_clone(("L1",), 1) for _ in faults]
    killed = _run_all(warm_cli, [(w, args, fault) for w, fault in zip(worlds, faults, strict=True)])
    for fault, (code, _, err) in zip(faults, killed, strict=True):
        assert code == -9, f"{fault}: expected SIGKILL, got {code}: {err}"
    for fault, world in zip(faults, worlds, strict=True):
        message = _recover_in_process(world)
        assert not journal_path(world.session).exists(), fault
        assert _state(world) == parent_before, f"{fault}: the parent changed"
        child = _child_state(world.sessions_dir, world.session.id)
        if fault == "journal":
            assert child is None and "cancelled" in message, fault
        else:
            assert child == expected, f"{fault}: the fork was not completed"


@pytest.mark.parametrize("verb", ["checkpoints", "resume --dry-run"])
def test_a_fork_killed_half_way_is_completed_by_its_own_next_command(
    world_clone: Callable[..., World], warm_cli: WarmCli, verb: str
) -> None:
    """The half-made session is the one a user sees (`tilth sessions`: failed, fork of...)
    and the one `tilth fork` told them to continue: its next command completes the fork."""
    probe = world_clone(("L1",), 1)
    target = resolve_checkpoint(probe.session, "T-001/implementing")
    steps = steps_for(TimelineController(probe.session).plan_fork(target))
    args = ["fork", probe.session.id, "--at", "T-001/implementing"]
    assert _run_all(warm_cli, [(probe, args, None)])[0][0] == 0
    expected = _child_state(probe.sessions_dir, probe.session.id)
    # Killed once the child exists and before its record is final.
    faults = ["fork-files", "fork-worktree", "fork-record", "fork-created+", "fork-files+"]
    assert all(f.rstrip("+") in steps for f in faults)
    worlds = [world_clone(("L1",), 1) for _ in faults]
    killed = _run_all(warm_cli, [(w, args, fault) for w, fault in zip(worlds, faults, strict=True)])
    assert [code for code, _, _ in killed] == [-9] * len(faults)
    children = [
        next(p.name for p in w.sessions_dir.iterdir() if p.name != w.session.id) for w in worlds
    ]
    jobs: list[Job] = [(w, [*verb.split()[:1], child, *verb.split()[1:]], None)
                       for w, child in zip(worlds, children, strict=True)]  # fmt: skip
    done = _run_all(warm_cli, jobs)
    for fault, world, (code, out, err) in zip(faults, worlds, done, strict=True):
        assert code == 0, f"{fault}: {out}{err}"
        assert "finished an interrupted fork" in err, f"{fault}: {err!r}"
        assert not journal_path(world.session).exists(), fault
        assert _child_state(world.sessions_dir, world.session.id) == expected, fault


def test_resuming_a_fork_killed_half_way_completes_it_first(
    world_clone: Callable[..., World], warm_cli: WarmCli
) -> None:
    """`tilth resume <fork>`, what `tilth fork` says to run next, completes the fork before
    its loop instead of failing on the branch the fork had not made yet."""
    import tilth
    from tilth.model.script import Reply

    probe = world_clone(("L1",), 1)
    args = ["fork", probe.session.id, "--at", "T-001/implementing"]
    assert _run_all(warm_cli, [(probe, args, None)])[0][0] == 0
    expected = _child_state(probe.sessions_dir, probe.session.id)
    assert expected is not None
    world = world_clone(("L1",), 1)
    assert _run_all(warm_cli, [(world, args, "fork-worktree")])[0][0] == -9
    (child,) = [p.name for p in world.sessions_dir.iterdir() if p.name != world.session.id]

    def interrupt(model: str, request: dict[str, Any]) -> Reply:
        raise KeyboardInterrupt

    model = tilth.ScriptedModel(tilth.Script(interrupt), "scripted")
    notices: list[str] = []
    settings = tilth.load_settings(
        {**_env(world, None), "TILTH_TEST_COMMAND": "true", "TILTH_SANDBOX": "off"}
    )
    session = tilth.open_session(child, settings)
    stop = tilth.resume(
        session, worker=model, evaluator=model, settings=settings, on_notice=notices.append
    )
    assert stop.reason == "interrupted", (stop, notices)
    assert any("finished an interrupted fork" in n for n in notices), notices
    assert not journal_path(world.session).exists()
    now = _child_state(world.sessions_dir, world.session.id)
    assert now is not None and not now["incomplete"]
    assert (now["tree"], now["prd"]) == (expected["tree"], expected["prd"])
    # The fork's checkpoints, then the stop this run recorded.
    assert now["checkpoints"][: len(expected["checkpoints"])] == expected["checkpoints"]
