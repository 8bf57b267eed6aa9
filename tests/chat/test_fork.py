"""A chat's fork is planned and carried out by the one journaled executor, like a git fork.

The chat is built once in-process (a scripted model) and its sessions copied per case, so
every copy forks the very same parent. Each fault case runs the real CLI with
``TILTH_FAULT_AT=<step>`` (the process SIGKILLs itself there), then the next command
completes the fork; the child must then equal the one an undisturbed fork made.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from tests.chat.support import tree_hash
from tests.chat.test_goback import story
from tests.conftest import run_cli_in_process
from tests.sessionview import SessionView
from tests.timeline.conftest import World
from tests.timeline.test_faults import _run_all
from tests.warm_cli import WarmCli
from tilth.chat import ChatEngine
from tilth.config import load_settings
from tilth.model import Script, ScriptedModel, reply
from tilth.session.store import Session
from tilth.timeline.controller import TimelineController
from tilth.timeline.rewind.executor import steps_for
from tilth.timeline.rewind.journal import journal_path, read_journal, read_operations

_STAMP = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+Z")
_OP_ID = re.compile(r"op-\d{8}-\d{6}-[0-9a-f]{6}")
FORK_STEPS = ["fork-created", "fork-files", "fork-worktree", "fork-record"]


def _built(tmp_path: Path) -> tuple[Path, str, str]:
    """A two-turn chat, closed; its sessions dir, its id and the second turn's checkpoint."""
    engine, _, _ = story(tmp_path)
    target = engine.turns()[1].id
    engine.close()
    return tmp_path / "home" / "sessions", engine.id, target


def _world(tmp_path: Path, sessions: Path, parent_id: str, name: str) -> World:
    """A copy of the chat's sessions under ``tmp_path/name`` (laid out as the fault helpers
    expect: ``<root>/sessions`` and ``<root>/home``); the blob store stays shared."""
    root = tmp_path / name
    shutil.copytree(sessions, root / "sessions", symlinks=True)
    (root / "home").mkdir()
    return World(root, Session(parent_id, root / "sessions" / parent_id))


def _cli(world: World, *args: str) -> Any:
    env = {"TILTH_HOME": str(world.root / "home"), "TILTH_SESSIONS_DIR": str(world.sessions_dir)}
    return run_cli_in_process(*args, env=env)


def _parent_files(world: World) -> dict[str, bytes]:
    """The parent's session files but its lock files and operations log."""
    out = {}
    for path in sorted(world.session.dir.rglob("*")):
        rel = path.relative_to(world.session.dir).as_posix()
        if path.is_file() and not rel.startswith(".lock") and rel != "timeline/operations.jsonl":
            out[rel] = path.read_bytes()
    return out


def _child(world: World) -> Path | None:
    children = [p for p in world.sessions_dir.iterdir() if p.name != world.session.id]
    assert len(children) <= 1, children
    return children[0] if children else None


def _child_state(world: World) -> dict[str, Any] | None:
    """Every file of the fork (its directory's by hash), with what differs between two runs
    blanked: its own id, where the copy lives, timestamps and op ids."""
    child = _child(world)
    if child is None:
        return None
    roots = {str(world.root.resolve()), str(world.root)}
    files: dict[str, Any] = {}
    for path in sorted(child.rglob("*")):
        rel = path.relative_to(child).as_posix()
        if not path.is_file() or rel.startswith((".lock", "workspace/")):
            continue
        text = path.read_text()
        for root in roots:
            text = text.replace(root, "ROOT")
        text = _OP_ID.sub("op-X", _STAMP.sub("T", text.replace(child.name, "CHILD")))
        files[rel] = text
    files["workspace/"] = tree_hash(child / "workspace")
    return files


def test_a_chat_fork_runs_its_steps_in_the_parents_journal(tmp_path: Path) -> None:
    engine, _, work = story(tmp_path)
    plan = engine.plan_fork(2)
    assert plan.fork is not None and plan.fork["kind"] == "chat"
    assert steps_for(plan) == [*FORK_STEPS, "finish"]
    child_id = plan.fork["child"]
    assert plan.fork["workspace"] == str(engine.session.dir.parent / child_id / "workspace")
    assert not (engine.session.dir.parent / child_id).exists()  # planning writes nothing
    result = engine.fork(2)
    child = Session.open(engine.session.dir.parent, result["session_id"])
    assert sorted(p.name for p in Path(result["directory"]).iterdir()) == ["hello.py", "keep.txt"]
    assert sorted(p.name for p in work.iterdir()) == ["hello.py", "keep.txt", "made.txt"]
    op = read_operations(engine.session)[-1]
    assert (op["kind"], op["child_session"], op["recovered"]) == ("fork", child.id, False)
    assert not journal_path(engine.session).exists()
    record = child.record().to_dict()
    assert (record["kind"], record["branch"], record["status"]) == ("chat", None, "all_done")
    assert record["workspace"] == record["source"] == result["directory"]
    assert "fork_incomplete" not in record
    assert record["forked_from"]["checkpoint"] == engine.turns()[1].id
    # The fork's timeline ends just before the turn it was made at: only turn 1 happened.
    assert [c.label for c in TimelineController(child).checkpoints().checkpoints] == ["write hello"]
    assert [e.type for e in child.events.events()][-1] == "fork"


def test_a_dry_run_of_a_chat_fork_writes_nothing(tmp_path: Path) -> None:
    engine, _, work = story(tmp_path)
    engine.close()
    home = tmp_path / "home"
    env = {"TILTH_HOME": str(home)}
    target = engine.turns()[1].id
    before = (tree_hash(home), tree_hash(work))
    dry = run_cli_in_process("fork", engine.id, "--at", target, "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert f"fork chat session {engine.id} at {target}" in dry.stdout
    assert "2 file(s) written from snapshots" in dry.stdout  # hello.py and keep.txt
    assert "checkpoints copied: 1" in dry.stdout and "is not changed" in dry.stdout
    assert "dry run: nothing was changed" in dry.stdout
    as_json = run_cli_in_process("fork", engine.id, "--at", target, "--dry-run", "--json", env=env)
    plan = json.loads(as_json.stdout)
    assert plan["op"] == "fork" and plan["fork"]["kind"] == "chat"
    assert plan["fork"]["branch"] is None
    assert (tree_hash(home), tree_hash(work)) == before
    assert [p.name for p in (home / "sessions").iterdir()] == [engine.id]


FAULTS = ["journal", *FORK_STEPS, "fork-files+", "fork-worktree+", "finish"]
"""Before each step, and just after the two that write many files (a retry redoes them)."""


def test_sigkill_at_every_step_of_a_chat_fork_then_the_next_command_completes_it(
    tmp_path: Path, warm_cli: WarmCli
) -> None:
    sessions, parent_id, target = _built(tmp_path)
    reference = _world(tmp_path, sessions, parent_id, "reference")
    parent_before = _parent_files(reference)
    undisturbed = _cli(reference, "fork", parent_id, "--at", target)
    assert undisturbed.returncode == 0, undisturbed.stderr
    expected = _child_state(reference)
    assert expected is not None and "fork_incomplete" not in expected["checkpoint.json"]
    assert sorted(expected["workspace/"]) == ["hello.py", "keep.txt"]

    worlds = [_world(tmp_path, sessions, parent_id, f"killed-{i}") for i in range(len(FAULTS))]
    args = ["fork", parent_id, "--at", target]
    killed = _run_all(warm_cli, [(w, args, fault) for w, fault in zip(worlds, FAULTS, strict=True)])
    for fault, world, (code, _, err) in zip(FAULTS, worlds, killed, strict=True):
        assert code == -9, f"{fault}: expected SIGKILL, got {code}: {err}"
        # The parent's journal says how far the fork got; nothing of the parent changed.
        journal = read_journal(world.session)
        assert journal is not None and journal.steps == [*FORK_STEPS, "finish"], fault
        step = fault.rstrip("+")
        done = [*FORK_STEPS, "finish"].index(step) if step != "journal" else 0
        # The step before ``finish`` is never marked done (a crash before ``finish``
        # repeats it): its journal write would only cost the fork's last moments.
        assert journal.done == FORK_STEPS[: min(done, len(FORK_STEPS) - 1)], fault
        during = _parent_files(world)
        assert during.pop("timeline/journal.json") and during == parent_before, fault
        child = _child(world)
        if step in ("journal", "fork-created"):
            assert child is None, fault
        else:
            assert child is not None, fault
            record = SessionView.at(child).record().to_dict()
            if step != "finish":
                assert record["fork_incomplete"] is True and record["status"] == "failed"
                assert record["kind"] == "chat", fault

        # The next command (any command that opens the parent) completes or cancels it.
        listed = _cli(world, "checkpoints", parent_id)
        assert listed.returncode == 0, f"{fault}: {listed.stderr}"
        assert not journal_path(world.session).exists(), fault
        assert _parent_files(world) == parent_before, f"{fault}: the parent changed"
        (op,) = [o for o in read_operations(world.session) if o["kind"] == "fork"]
        if fault == "journal":
            assert "cancelled" in listed.stderr and op["outcome"] == "abandoned", fault
            assert _child(world) is None, fault
        else:
            assert "finished an interrupted fork" in listed.stderr, fault
            assert op["recovered"] is True, fault
            assert _child_state(world) == expected, f"{fault}: not the undisturbed fork"


def test_opening_a_half_made_chat_fork_completes_it(tmp_path: Path, warm_cli: WarmCli) -> None:
    sessions, parent_id, target = _built(tmp_path)
    (world,) = [_world(tmp_path, sessions, parent_id, "w")]
    args = ["fork", parent_id, "--at", target]
    ((code, _, err),) = _run_all(warm_cli, [(world, args, "fork-worktree")])
    assert code == -9, err
    child = _child(world)
    assert child is not None and not (child / "workspace").exists()
    settings = load_settings(
        {"TILTH_HOME": str(world.root / "home"), "TILTH_SESSIONS_DIR": str(world.sessions_dir)}
    )
    notices: list[str] = []
    model = ScriptedModel(Script({"*": [reply("in the fork")]}))
    engine = ChatEngine.resume(
        settings,
        child.name,
        model,
        index_in_background=False,
        listener=lambda event: notices.append(str(event.data.get("text"))),
    )
    assert any("finished an interrupted fork" in n for n in notices), notices
    assert sorted(p.name for p in engine.directory.iterdir()) == ["hello.py", "keep.txt"]
    assert [t.label for t in engine.turns()] == ["write hello"]
    assert engine.send("go on")["turn"] == 2
    engine.close()
    assert not journal_path(world.session).exists()


def test_a_fork_from_the_chat_gets_the_setup_command_as_every_fork_does(tmp_path: Path) -> None:
    from tests.chat.support import Recorder

    directory = tmp_path / "work"
    directory.mkdir()
    setup = "echo forked > .setup-marker"
    settings = load_settings({"TILTH_HOME": str(tmp_path / "home"), "TILTH_SETUP_COMMAND": setup})
    events = Recorder()
    model = ScriptedModel(Script({"*": [reply("Hello.")]}), name="chat")
    engine = ChatEngine.start(
        settings, directory, model, listener=events, index_in_background=False
    )
    engine.send("hi")
    forked = engine.fork(1)
    engine.close()
    child = Path(forked["directory"])
    assert (child / ".setup-marker").read_text() == "forked\n"
    assert not (directory / ".setup-marker").exists()
    (logged,) = SessionView.at(settings.sessions_dir / forked["session_id"]).payloads("setup")
    assert logged["why"] == "fork" and logged["ok"] is True
    assert f"running TILTH_SETUP_COMMAND in {child}: {setup}" in [
        n["text"] for n in events.of("notice")
    ]
