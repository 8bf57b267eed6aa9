"""A state machine over random turns, rewinds, restarts, forks, undos, summaries and collections.

Edit turns go through the real ToolBox, bash turns through real ``bash`` (create, append,
delete, rename, chmod), and every turn is recorded by the real Recorder. After each rewind
the worktree must equal, file for file, the tree seen when that checkpoint was recorded,
and the conversation (with summaries expanded) the thread seen then. Forks must equal
their checkpoint and leave the parent alone; an undo must return to exactly the state
before the go-back it undoes (an undo of an undo is redo); a collection must never drop a
blob that a checkpoint still names.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.conftest import make_repo
from tests.timeline.simrun import prep
from tests.trees import tree_hash
from tilth import git
from tilth.config import load_settings
from tilth.errors import UsageError
from tilth.model import Script, ScriptedModel, reply
from tilth.session.threads import StoredMessage
from tilth.timeline import Recorder, list_checkpoints, open_for_writing, plan_rewind
from tilth.timeline.controller import TimelineController
from tilth.timeline.record.blob_store import session_store, split_entry
from tilth.timeline.record.retention import collect
from tilth.timeline.record.turn_capture import TurnCapture
from tilth.timeline.rewind.summarize import summarize
from tilth.tools import ToolBox

THREAD = "worker-T-001"
NAMES = ("a.txt", "src/b.py", "src/deep/c.md", "d.txt", "notes.log")  # *.log is ignored
names = st.sampled_from(NAMES)
texts = st.text(alphabet="xyz \n", max_size=12)


@dataclass(frozen=True)
class Seen:
    """What a checkpoint fixed: the tree, HEAD and the conversation (summaries expanded)."""

    tree: str
    head: str
    thread: tuple[str, ...]


def expanded(stored: list[StoredMessage]) -> tuple[str, ...]:
    """Message texts with every summary replaced by the messages it stands for."""
    out: list[str] = []
    for message in stored:
        replaced = message.meta.get("replaced")
        if isinstance(replaced, list):
            inner = [
                StoredMessage(str(i["id"]), i["message"], i.get("meta") or {}) for i in replaced
            ]
            out.extend(expanded(inner))
        else:
            out.append(str(message.message.get("content")))
    return tuple(out)


class TimelineMachine(RuleBasedStateMachine):
    """One session (or its forks) driven through random turns and go-backs."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="tilth-sm-"))
        repo = make_repo(
            self.tmp / "repo", {"README.md": "# r\n", ".gitignore": "*.log\n", "a.txt": "a\n"}
        )
        self.sessions_dir = self.tmp / "sessions"
        self.session = prep(self.sessions_dir, repo, ("L1",))
        self.turns = 0
        self.user_edits = 0  # every user edit differs from all before it
        self.seen: dict[str, Seen] = {}
        self.recorder: Recorder | None = None
        self.undo_stack: list[tuple[str, Seen, dict[str, Seen]]] = []
        """(undo point, the state before the go-back, the checkpoints seen then), newest last."""
        self._open()
        seed = list_checkpoints(self.session)[0]
        self.seen[seed.id] = Seen(tree_hash(self.worktree), seed.head, self._thread())
        assert self.recorder is not None
        start = self.recorder.task_start("T-001")
        self.seen[start.id] = Seen(tree_hash(self.worktree), start.head, self._thread())

    # ---- plumbing -----------------------------------------------------------------------
    @property
    def worktree(self) -> Path:
        return Path(str(self.session.record().workspace))

    def _open(self) -> None:
        """A fresh recorder and toolbox, as a new process would have."""
        self._close()
        self.recorder = Recorder(self.session, self.worktree)
        self.box = ToolBox(self.worktree, observer=self.recorder.observer)

    def _close(self) -> None:
        if self.recorder is not None and isinstance(self.recorder.observer, TurnCapture):
            self.recorder.observer.close()

    def _thread(self) -> tuple[str, ...]:
        return expanded(self.session.threads.get(THREAD).read())

    def _record(self, label: str) -> None:
        assert self.recorder is not None
        self.turns += 1
        thread = self.session.threads.get(THREAD)
        thread.append({"role": "assistant", "content": f"{label} {self.turns}"})
        thread.append({"role": "user", "content": f"result {self.turns}"})
        cp = self.recorder.turn(
            "worker", task_id="T-001", stage="implementing", turn=self.turns, label=label
        )
        self.seen[cp.id] = Seen(tree_hash(self.worktree), cp.head, self._thread())

    def _now(self) -> Seen:
        return Seen(tree_hash(self.worktree), git.head(self.worktree), self._thread())

    def _execute(self, plan: Any) -> None:
        """Carry ``plan`` out through the controller, remembering its undo point."""
        before, seen = self._now(), dict(self.seen)
        result = TimelineController(self.session).execute(plan)
        assert result.undo_point is not None
        self.undo_stack.append((result.undo_point, before, seen))

    def _contents(self, names: list[str]) -> dict[str, str | None]:
        """What each of ``names`` holds in the worktree now (None: absent)."""
        paths = {name: self.worktree / name for name in names}
        return {name: p.read_text() if p.is_file() else None for name, p in paths.items()}

    def _kept_then_forced(self, target: Any, kept: dict[str, str | None]) -> None:
        """A code rewind to ``target`` left the user's edits ``kept`` as they were; a forced
        rewind then gives exactly the tree seen at ``target``."""
        assert self._contents(sorted(kept)) == kept
        self._forget_missing()  # a rewind of both scopes drops later checkpoints
        if kept:
            with open_for_writing(self.session):
                self._execute(plan_rewind(self.session, target, "code", force=True))
        assert tree_hash(self.worktree) == self.seen[target.id].tree

    def _forget_missing(self) -> None:
        present = {cp.id for cp in list_checkpoints(self.session)}
        self.seen = {k: v for k, v in self.seen.items() if k in present}

    def teardown(self) -> None:
        self._close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- turns ------------------------------------------------------------------------------
    @rule(ops=st.lists(st.tuples(st.booleans(), names, texts), min_size=1, max_size=3))
    def edit_turn(self, ops: list[tuple[bool, str, str]]) -> None:
        for use_edit, name, text in ops:
            path = self.worktree / name
            if use_edit and path.is_file() and path.read_text():
                old = path.read_text()
                args = {"path": name, "old_string": old, "new_string": old + text + "!"}
                outcome = self.box.dispatch("edit_file", args)
            else:
                outcome = self.box.dispatch("write_file", {"path": name, "content": text})
            assert not outcome.is_error, outcome.result
        self._record("edit")

    @rule(
        ops=st.lists(
            st.tuples(
                st.sampled_from(["create", "append", "delete", "rename", "chmod"]), names, names
            ),
            min_size=1,
            max_size=3,
        )
    )
    def bash_turn(self, ops: list[tuple[str, str, str]]) -> None:
        parts = []
        for kind, a, b in ops:
            if kind == "create":
                parts.append(f"mkdir -p $(dirname {a}) && printf 'made {self.turns}\\n' > {a}")
            elif kind == "append":
                parts.append(f"mkdir -p $(dirname {a}) && echo more >> {a}")
            elif kind == "delete":
                parts.append(f"rm -f {a}")
            elif kind == "rename" and a != b:
                parts.append(f"if [ -f {a} ]; then mkdir -p $(dirname {b}) && mv {a} {b}; fi")
            elif kind == "chmod":
                parts.append(f"if [ -f {a} ]; then chmod +x {a}; fi")
        outcome = self.box.dispatch("bash", {"command": " ; ".join(parts or ["true"])})
        assert not outcome.blocked, outcome.result
        self._record("bash")

    # ---- going back -------------------------------------------------------------------------
    @precondition(lambda self: len(self.seen) > 1)
    @rule(
        data=st.data(), scope=st.sampled_from(["both", "code", "conversation"]), live=st.booleans()
    )
    def rewind(self, data: st.DataObject, scope: str, live: bool) -> None:
        target_id = data.draw(st.sampled_from(sorted(self.seen)))
        target = next(cp for cp in list_checkpoints(self.session) if cp.id == target_id)
        tree_before = tree_hash(self.worktree)
        if not live:
            self._close()  # a new process: the plan walks the worktree
        # live: this process's capture (as in chat) tells the planner what changed
        with open_for_writing(self.session):
            # Edits an undo gave back to the user are the user's: a rewind keeps them.
            kept = self._contents(plan_rewind(self.session, target, scope, survey=True).conflicts)
            self._execute(plan_rewind(self.session, target, scope))
        seen = self.seen[target_id]
        if scope == "conversation":
            assert tree_hash(self.worktree) == tree_before
        else:
            self._kept_then_forced(target, kept)
            assert git.head(self.worktree) == seen.head
        if scope != "code":
            assert self._thread() == seen.thread
            self._forget_missing()
        self._open()

    @precondition(lambda self: len(self.seen) > 1)
    @rule(data=st.data(), name=names, text=texts, force=st.booleans(), live=st.booleans())
    def user_edit_then_rewind(
        self, data: st.DataObject, name: str, text: str, force: bool, live: bool
    ) -> None:
        target_id = data.draw(st.sampled_from(sorted(self.seen)))
        target = next(cp for cp in list_checkpoints(self.session) if cp.id == target_id)
        # Unique, so the edit never equals a state a turn already recorded (a rewrite with
        # the recorded content is no edit, and no conflict).
        self.user_edits += 1
        mine = f"user edit {self.user_edits} {text}\n"
        (self.worktree / name).parent.mkdir(parents=True, exist_ok=True)
        (self.worktree / name).write_text(mine)
        if not live:
            self._close()
        with open_for_writing(self.session):
            plan = plan_rewind(self.session, target, "code", force=force, survey=True)
            if not name.endswith(".log"):
                assert name in plan.conflicts
            kept = {} if force else self._contents(plan.conflicts)
            if not force:
                # Without the survey only the files the rewind writes are read: the same
                # files are written, and fewer edits are listed (those it leaves alone).
                quick = plan_rewind(self.session, target, "code")
                assert quick.files == plan.files
                assert set(quick.conflicts) <= set(plan.conflicts)
                plan = quick if data.draw(st.booleans()) else plan
            self._execute(plan)
        if not force and not name.endswith(".log"):
            assert kept[name] == mine
        self._kept_then_forced(target, kept)
        self._open()

    @precondition(lambda self: len(self.seen) > 1)
    @rule(data=st.data(), switch=st.booleans())
    def fork(self, data: st.DataObject, switch: bool) -> None:
        target_id = data.draw(st.sampled_from(sorted(self.seen)))
        target = next(cp for cp in list_checkpoints(self.session) if cp.id == target_id)
        before = (tree_hash(self.worktree), git.head(self.worktree), self._thread())
        with open_for_writing(self.session):
            child = TimelineController(self.session).fork(target)
        assert tree_hash(child.worktree) == self.seen[target_id].tree
        assert expanded(child.session.threads.get(THREAD).read()) == self.seen[target_id].thread
        assert (tree_hash(self.worktree), git.head(self.worktree), self._thread()) == before
        if switch:
            self._close()
            self.session = child.session
            self._forget_missing()
            self.undo_stack = []  # undo points belong to the parent's timeline
            self._open()

    @precondition(
        lambda self: any(cp.kind == "task_start" for cp in list_checkpoints(self.session))
    )
    @rule(dirty=st.booleans())
    def restart(self, dirty: bool) -> None:
        if dirty:
            (self.worktree / "a.txt").write_text(f"uncommitted {self.turns}\n")
        start = next(cp for cp in list_checkpoints(self.session) if cp.kind == "task_start")
        self._close()
        controller = TimelineController(self.session)
        with controller.writing():
            self._execute(controller.plan_restart("T-001", None))
        assert tree_hash(self.worktree) == self.seen[start.id].tree
        assert self._thread() == self.seen[start.id].thread
        self._forget_missing()
        self._open()

    @precondition(lambda self: bool(self.undo_stack))
    @rule()
    def undo(self) -> None:
        point, before, seen = self.undo_stack.pop()
        self._close()
        controller = TimelineController(self.session)
        with controller.writing():
            plan = controller.plan_undo()
            assert plan.target == point
            now, seen_now = self._now(), dict(self.seen)
            result = controller.execute(plan)
        assert self._now() == before
        self.seen = seen
        present = {cp.id for cp in list_checkpoints(self.session)}
        assert set(seen) <= present, sorted(set(seen) - present)
        assert result.undo_point is not None
        self.undo_stack.append((result.undo_point, now, seen_now))  # so undo again = redo
        self._open()

    @precondition(lambda self: len(self.seen) > 1)
    @rule(data=st.data(), direction=st.sampled_from(["up-to", "from"]))
    def summarize_thread(self, data: st.DataObject, direction: str) -> None:
        target_id = data.draw(st.sampled_from(sorted(self.seen)))
        target = next(cp for cp in list_checkpoints(self.session) if cp.id == target_id)
        before = self._thread()
        model = ScriptedModel(Script([reply(f"summary {self.turns}")]))
        try:
            summarize(self.session, target, direction, model, thread_key=THREAD)
        except UsageError:
            return  # nothing on that side of the checkpoint, or its head was summarized
        assert self._thread() == before

    @rule()
    def collect_garbage(self) -> None:
        env: dict[str, Any] = {"TILTH_CHECKPOINT_MAX_BYTES": "0"}
        cfg = load_settings({"TILTH_HOME": str(load_settings().home), **env})
        had = {cp.id for cp in list_checkpoints(self.session)}
        collect(cfg, grace_seconds=0)
        self._forget_missing()
        present = {cp.id for cp in list_checkpoints(self.session)}
        pruned = had - present
        # A pruned undo point cannot be undone any more (its archive went with it), and an
        # undo does not bring back what retention pruned.
        self.undo_stack = [
            (point, before, {k: v for k, v in seen.items() if k not in pruned})
            for point, before, seen in self.undo_stack
            if point in present
        ]

    @invariant()
    def every_named_blob_exists(self) -> None:
        store = session_store(self.session)
        for cp in list_checkpoints(self.session):
            for entry in cp.overlay.values():
                if entry:
                    assert store.has(split_entry(entry)[0]), (cp.id, entry)


def test_random_timelines_restore_exactly(
    tilth_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILTH_CHECKPOINT_AUTO_GC", "0")
    run_state_machine_as_test(
        TimelineMachine,
        settings=settings(
            max_examples=20,
            stateful_step_count=12,
            deadline=None,
            # No explain phase: it traces every line while re-running a failure, and the
            # shrink then outlasted the test's timeout instead of reporting the steps.
            phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
