"""A state machine over random turns, rewinds, restarts, forks, undos, summaries and collections.

Edit turns go through the real ToolBox, bash turns through real ``bash`` (create, append,
delete, rename, chmod), and every turn is recorded by the real Recorder. After each rewind
the worktree must equal, file for file, the tree seen when that checkpoint was recorded,
and the conversation (with summaries expanded) the thread seen then. Forks must equal
their checkpoint and leave the parent alone; an undo must return to exactly the state
before the go-back it undoes (an undo of an undo is redo); a collection must never drop a
blob that a checkpoint still names.

The walk is seeded and goes in rounds (every action that can act, in an order the seed
draws, each variant in turn), and the test fails if it missed a transition (``TRANSITIONS``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
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
SCOPES = ("both", "code", "conversation")
names = st.sampled_from(NAMES)
texts = st.text(alphabet="xyz \n", max_size=12)

COVERED: Counter[tuple[object, ...]] = Counter()
"""Each transition the walk took (rule and its variant), counted across examples."""

TRANSITIONS = {
    ("edit",),
    ("bash",),
    *(("rewind", scope, live) for scope in ("both", "code", "conversation") for live in (0, 1)),
    *(("user_edit", force, live) for force in (0, 1) for live in (0, 1)),
    ("user_edit", "quick plan"),
    ("fork", "stay"),
    ("fork", "switch"),
    ("restart", "clean"),
    ("restart", "dirty"),
    ("undo",),
    ("redo",),
    ("summarize", "up-to"),
    ("summarize", "from"),
    ("collect", "pruned"),
}
"""What the walk must have taken for the test to prove anything: every go-back in every
scope, with and without a live capture, the undo of an undo, a collection that pruned."""


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


ACTIONS = (
    "edit_turn",
    "bash_turn",
    "rewind",
    "user_edit_then_rewind",
    "fork",
    "restart",
    "undo",
    "summarize_thread",
    "collect_garbage",
)
"""What a step can do (the machine's methods of these names, each drawing its own data)."""


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
        self.redo_points: set[str] = set()
        """Undo points an undo recorded: undoing one is a redo."""
        self.runs: Counter[str] = Counter()
        """How often each rule ran in this walk: it favours the rules it took least."""
        self.can_restart: bool | None = None
        """Whether the session has a task start to restart from (None: not read since the
        last step)."""
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

    def _can(self, action: str) -> bool:
        """Whether ``action`` can act in this state."""
        if action in ("rewind", "user_edit_then_rewind", "fork", "summarize_thread"):
            return len(self.seen) > 1
        if action == "restart":
            if self.can_restart is None:  # read once per step
                kinds = {cp.kind for cp in list_checkpoints(self.session)}
                self.can_restart = "task_start" in kinds
            return self.can_restart
        if action == "undo":
            return bool(self.undo_stack)
        return True

    @rule(data=st.data())
    def step(self, data: st.DataObject) -> None:
        """One action: of those that can act, one the walk has taken least (the walk goes
        in rounds, each in an order the seed draws), so a short walk takes every action."""
        can = [name for name in ACTIONS if self._can(name)]
        least = min(self.runs[name] for name in can)
        action = data.draw(st.sampled_from([n for n in can if self.runs[n] == least]))
        self.runs[action] += 1
        self.can_restart = None
        getattr(self, action)(data)

    def _variant(self, data: st.DataObject, key: str, variants: list[Any]) -> Any:
        """One of ``variants``, drawn from those this walk has taken least (and counted)."""
        least = min(self.runs[f"{key}{v}"] for v in variants)
        chosen = data.draw(
            st.sampled_from([v for v in variants if self.runs[f"{key}{v}"] == least])
        )
        self.runs[f"{key}{chosen}"] += 1
        return chosen

    def _start_task_again(self) -> None:
        """A turn after a go-back before the task's start (or a collection that took it)
        starts the task again, on a clean worktree, as the run loop does: so a restart can
        follow later in the walk."""
        self.can_restart = None
        if self._can("restart") or git.git("status", "--porcelain", cwd=self.worktree).strip():
            return
        assert self.recorder is not None
        start = self.recorder.task_start("T-001")
        self.seen[start.id] = Seen(tree_hash(self.worktree), start.head, self._thread())
        self.can_restart = None

    # ---- turns ------------------------------------------------------------------------------
    def edit_turn(self, data: st.DataObject) -> None:
        ops = data.draw(st.lists(st.tuples(st.booleans(), names, texts), min_size=1, max_size=3))
        self._start_task_again()
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
        COVERED["edit",] += 1

    def bash_turn(self, data: st.DataObject) -> None:
        kinds = st.sampled_from(["create", "append", "delete", "rename", "chmod"])
        ops = data.draw(st.lists(st.tuples(kinds, names, names), min_size=1, max_size=3))
        self._start_task_again()
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
        COVERED["bash",] += 1

    # ---- going back -------------------------------------------------------------------------
    def rewind(self, data: st.DataObject) -> None:
        self.can_restart = None
        scope, live = self._variant(data, "rewind", [(s, b) for b in (True, False) for s in SCOPES])
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
        COVERED["rewind", scope, int(live)] += 1

    def user_edit_then_rewind(self, data: st.DataObject) -> None:
        name, text = data.draw(names), data.draw(texts)
        self.can_restart = None
        force, live = self._variant(
            data, "user_edit", [(f, b) for f in (False, True) for b in (False, True)]
        )
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
                if self._variant(data, "quick plan", [False, True]):
                    plan = quick
                    COVERED["user_edit", "quick plan"] += 1
            self._execute(plan)
        if not force and not name.endswith(".log"):
            assert kept[name] == mine
        self._kept_then_forced(target, kept)
        self._open()
        COVERED["user_edit", int(force), int(live)] += 1

    def fork(self, data: st.DataObject) -> None:
        self.can_restart = None
        switch = self._variant(data, "fork", [False, True])
        target_id = data.draw(st.sampled_from(sorted(self.seen)))
        target = next(cp for cp in list_checkpoints(self.session) if cp.id == target_id)
        before = (tree_hash(self.worktree), git.head(self.worktree), self._thread())
        with open_for_writing(self.session):
            child = TimelineController(self.session).fork(target)
        assert tree_hash(child.worktree) == self.seen[target_id].tree
        assert expanded(child.session.threads.get(THREAD).read()) == self.seen[target_id].thread
        assert (tree_hash(self.worktree), git.head(self.worktree), self._thread()) == before
        COVERED["fork", "switch" if switch else "stay"] += 1
        if switch:
            self._close()
            self.session = child.session
            self._forget_missing()
            self.undo_stack = []  # undo points belong to the parent's timeline
            self.redo_points = set()
            self._open()

    def restart(self, data: st.DataObject) -> None:
        self.can_restart = None
        dirty = self._variant(data, "restart", [False, True])
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
        COVERED["restart", "dirty" if dirty else "clean"] += 1

    def undo(self, data: st.DataObject) -> None:
        self.can_restart = None
        self._undo_once()
        if self._variant(data, "redo", [False, True]):
            self._undo_once()  # the undo of an undo: a redo

    def _undo_once(self) -> None:
        point, before, seen = self.undo_stack.pop()
        kind = "redo" if point in self.redo_points else "undo"
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
        self.redo_points.add(result.undo_point)
        self._open()
        COVERED[kind,] += 1

    def summarize_thread(self, data: st.DataObject) -> None:
        self.can_restart = None
        direction = self._variant(data, "summarize", ["up-to", "from"])
        before = self._thread()
        for _ in range(3):  # a checkpoint with nothing on that side is refused: try another
            target_id = data.draw(st.sampled_from(sorted(self.seen)))
            target = next(cp for cp in list_checkpoints(self.session) if cp.id == target_id)
            model = ScriptedModel(Script([reply(f"summary {self.turns}")]))
            try:
                summarize(self.session, target, direction, model, thread_key=THREAD)
            except UsageError:
                continue  # nothing on that side of the checkpoint, or its head was summarized
            assert self._thread() == before
            COVERED["summarize", direction] += 1
            return
        self.runs[f"summarize{direction}"] -= 1  # that direction stays the one to try next

    def collect_garbage(self, data: st.DataObject) -> None:
        self.can_restart = None
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
        if pruned:
            COVERED["collect", "pruned"] += 1

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
    """A seeded walk (the same every run), long enough to take every transition."""
    monkeypatch.setenv("TILTH_CHECKPOINT_AUTO_GC", "0")
    COVERED.clear()
    run_state_machine_as_test(TimelineMachine, settings=WALK)
    missed = sorted(TRANSITIONS - set(COVERED), key=str)
    assert not missed, f"the walk never took {missed}; taken: {dict(COVERED)}"


WALK = settings(
    max_examples=2,
    stateful_step_count=40,
    deadline=None,
    derandomize=True,
    database=None,
    # No explain phase: it traces every line while re-running a failure, and the
    # shrink then outlasted the test's timeout instead of reporting the steps.
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
"""The walk: seeded (``derandomize``), so the steps it takes are the same every run and
``TRANSITIONS`` holds for certain (eighty steps, each transition taken at least once, as
with the hundred steps it took before, at four fifths of the CPU; the first example is
Hypothesis' simplest one, which takes rewind variants in list order, so the live ones
come first; twenty examples of twelve random steps cost four times the CPU and left
transitions untaken); a failure still shrinks."""
