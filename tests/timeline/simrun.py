"""A simulated prep + run built from the real APIs, for timeline tests.

It does what prep-feature and the run loop do to a session, minus the model:
git commits on the session branch (``seed: ...``, ``task/<T>: complete <stage>
stage``), events, prd/tasks/ledger/progress/threads/tokens, and Recorder calls
in the order the run loop makes them. A run is a flat list of *actions*; each
action reads what it needs from disk, so after a rewind the test can continue
the run from the action after any checkpoint (with a different ``salt`` so the
new future differs from the old one).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.trees import tree_hash
from tilth import git, git_worktrees
from tilth.session.files import atomic_write_json, read_json
from tilth.session.store import Session
from tilth.timeline import Checkpoint, Recorder

STAGES = {
    "L1": ("planning", "implementing", "code_review", "verifying"),
    "L2": (
        "brainstorming",
        "design_review",
        "planning",
        "implementing",
        "code_review",
        "verifying",
    ),
}
PREP_TOKENS = 1234


def prep(sessions_dir: Path, repo: Path, tiers: tuple[str, ...] = ("L1", "L1")) -> Session:
    """A prepared session: worktree, seed commit, prep events, a seed checkpoint."""
    session = Session.create(sessions_dir, repo)
    worktree = git_worktrees.ensure_worktree(repo, session.workspace_dir, session.branch)
    session.update_checkpoint(workspace=str(worktree), branch=session.branch)
    session.log("session_start", phase="prep-feature", source=str(repo))
    interview = session.threads.get("interviewer")
    interview.append({"role": "user", "content": "build the feature"})
    interview.append({"role": "assistant", "content": "ok, writing the seed"})
    session.log("model_call", actor="interviewer", tokens=PREP_TOKENS)
    prd = []
    for number, tier in enumerate(tiers, 1):
        tid = f"T-{number:03d}"
        prd.append(
            {
                "id": tid,
                "title": f"task {number}",
                "description": f"do thing {number}",
                "acceptance_criteria": [f"thing {number} works"],
                "status": "pending",
                "tier": tier,
            }
        )
        test = worktree / "tests" / f"test_t{number:03d}_thing.py"
        test.parent.mkdir(exist_ok=True)
        test.write_text(f"def test_thing_{number}():\n    assert True\n")
    session.save_prd(prd)
    atomic_write_json(session.seed_meta_path, {"tldr": "a feature", "tokens": {"total": 1234}})
    sha = git.commit_all(worktree, f"seed: {len(prd)} task(s) + {len(prd)} acceptance test(s)")
    session.update_checkpoint(tokens_used=PREP_TOKENS)
    session.log("session_prepared", tokens_used=PREP_TOKENS)
    session.log("seed_committed", sha=sha, branch=session.branch)
    session.set_status("prepared")
    Recorder(session, worktree).seed()
    return session


def worktree_of(session: Session) -> Path:
    return Path(str(session.record().workspace))


Action = Callable[[Recorder, str], "Checkpoint | None"]


def _set_task_status(session: Session, task_id: str, status: str) -> None:
    prd = session.load_prd()
    for task in prd:
        if task["id"] == task_id:
            task["status"] = status
    session.save_prd(prd)


def _task_state(session: Session, task_id: str) -> dict[str, Any]:
    path = session.tasks_dir / f"{task_id}.json"
    if not path.exists():
        return {"task_id": task_id, "stages_done": [], "outputs": {}, "stage_commits": {}}
    data = read_json(path, what="task")
    assert isinstance(data, dict)
    return data


def _start(task_id: str) -> Action:
    def act(rec: Recorder, salt: str) -> Checkpoint:
        session = rec.session
        session.set_status("running")
        _set_task_status(session, task_id, "in_progress")
        session.tasks_dir.mkdir(exist_ok=True)
        state = _task_state(session, task_id)
        state["base_commit"] = git.head(rec.worktree)
        atomic_write_json(session.tasks_dir / f"{task_id}.json", state)
        session.log("task_start", task_id=task_id)
        return rec.task_start(task_id)

    return act


def _turn(task_id: str, stage: str, turn: int, edit: bool) -> Action:
    def act(rec: Recorder, salt: str) -> Checkpoint:
        session = rec.session
        actor = "evaluator" if stage.endswith("review") else "worker"
        thread = session.threads.get(f"{actor}-{task_id}")
        thread.append({"role": "user", "content": f"{stage} turn {turn} ({salt})"})
        thread.append({"role": "assistant", "content": f"reply {turn} {salt}"})
        session.log("model_call", actor=actor, task_id=task_id, stage=stage, turn=turn)
        if edit:
            target = rec.worktree / "src" / f"{task_id.lower()}_{stage}.py"
            target.parent.mkdir(exist_ok=True)
            target.write_text(f"# {task_id} {stage} turn {turn} {salt}\n")
            session.log("tool_call", name="write_file", path=str(target.name))
            session.log("tool_result", ok=True)
        session.add_tokens(100)
        return rec.turn(
            actor, task_id=task_id, stage=stage, turn=turn, label=f"{stage} turn {turn}"
        )

    return act


def _stage_done(task_id: str, stage: str, last: bool) -> Action:
    def act(rec: Recorder, salt: str) -> Checkpoint:
        session = rec.session
        if stage.endswith("review"):
            session.ledger.append(task_id, {"stage": stage, "verdict": "accept", "salt": salt})
            session.log("evaluator_verdict", task_id=task_id, verdict="accept")
        sha = git.commit_all(
            rec.worktree, f"task/{task_id}: complete {stage} stage", allow_empty=True
        )
        session.log("stage_completed", task_id=task_id, stage=stage, sha=sha)
        state = _task_state(session, task_id)
        state["stages_done"] = [*state.get("stages_done", []), stage]
        state["outputs"] = {**state.get("outputs", {}), stage: f"{stage} output {salt}"}
        state["stage_commits"] = {**state.get("stage_commits", {}), stage: sha}
        atomic_write_json(session.tasks_dir / f"{task_id}.json", state)
        if last:
            _set_task_status(session, task_id, "done")
            with open(session.progress_path, "a") as handle:
                handle.write(f"{task_id}\tdone\t{salt}\n")
            session.log("task_done", task_id=task_id)
        return rec.stage(task_id, stage)

    return act


def plan_actions(session: Session, turns: int = 2) -> list[Action]:
    """Every action of a full run over the session's prd, in order."""
    actions: list[Action] = []
    for task in session.load_prd():
        tid = task["id"]
        stages = STAGES[task.get("tier") or "L1"]
        actions.append(_start(tid))
        for index, stage in enumerate(stages):
            for turn in range(1, turns + 1):
                actions.append(_turn(tid, stage, turn, edit=stage == "implementing"))
            actions.append(_stage_done(tid, stage, last=index == len(stages) - 1))
    return actions


def finish_run(session: Session) -> None:
    """What the loop does when every task is done."""
    session.log("stop", reason="all_done")
    session.set_status("all_done")
    (session.dir / "summary.json").write_text("{}\n")
    (session.dir / "chat.html").write_text("<html></html>\n")
    (session.dir / "proposed-learnings.md").write_text("- learn\n")


@dataclass
class Observed:
    """What a checkpoint should bring back: tree, HEAD, task statuses, log length."""

    tree: str
    head: str
    statuses: dict[str, str]
    events: int
    clean: bool


def observe(session: Session) -> Observed:
    """The four differential-test values, as they are now."""
    worktree = worktree_of(session)
    statuses = {t["id"]: t["status"] for t in session.load_prd()}
    return Observed(
        tree=tree_hash(worktree),
        head=git.head(worktree),
        statuses=statuses,
        events=len(session.events.events()),
        clean=not git.is_dirty(worktree),
    )


@dataclass
class SimRun:
    """Runs actions and remembers, per checkpoint, the action index and what it saw."""

    session: Session
    actions: list[Action] = field(default_factory=list)
    index_of: dict[str, int] = field(default_factory=dict)
    seen: dict[str, Observed] = field(default_factory=dict)

    turns: int = 2

    def __post_init__(self) -> None:
        if not self.actions:
            self.actions = plan_actions(self.session, self.turns)

    def run(self, start: int = 0, stop: int | None = None, salt: str = "a") -> None:
        recorder = Recorder(self.session, worktree_of(self.session))
        for index in range(start, len(self.actions) if stop is None else stop):
            checkpoint = self.actions[index](recorder, salt)
            if checkpoint is not None:
                self.index_of[checkpoint.id] = index
                self.seen[checkpoint.id] = observe(self.session)


def snapshot_dir(session: Session) -> dict[str, bytes]:
    """Every file of the session dir except the worktree and timeline (for equality checks)."""
    out: dict[str, bytes] = {}
    for path in sorted(session.dir.rglob("*")):
        rel = path.relative_to(session.dir).as_posix()
        if rel.startswith(("workspace", "timeline")) or rel.startswith(".lock") or path.is_dir():
            continue
        out[rel] = path.read_bytes()
    return out


def load_json(path: Path) -> Any:
    return json.loads(path.read_text())


def clone_world(src: Path, dst: Path, session: Session) -> Session:
    """Copy a ``repo`` + ``sessions`` tree to ``dst`` and re-link the worktree there."""
    import shutil

    shutil.copytree(src, dst, symlinks=True)
    clone = Session(session.id, dst / session.dir.relative_to(src))
    cp = clone.record().to_dict()
    source = dst / Path(str(cp["source"])).relative_to(src)
    workspace = dst / Path(str(cp["workspace"])).relative_to(src)
    # Re-point both halves of the worktree link by hand: ``git worktree repair`` would
    # follow the copied .git file back to the original repository and re-link that one.
    link = workspace / ".git"
    admin = Path(link.read_text().split("gitdir:", 1)[1].strip())
    admin = dst / admin.relative_to(src)
    link.write_text(f"gitdir: {admin}\n")
    (admin / "gitdir").write_text(f"{link}\n")
    clone.update_checkpoint(source=str(source), workspace=str(workspace))
    return clone


def fingerprint(session: Session) -> dict[str, Any]:
    """Everything a go-back operation restores, minus its own timestamps and op ids."""
    worktree = worktree_of(session)
    files = snapshot_dir(session)
    events = files.pop("events.jsonl", b"").decode().splitlines()
    records = [json.loads(line) for line in events]
    for record in records:
        if record["type"] in ("rewind", "restart", "undo", "session_resume"):
            record["ts"] = record["payload"]["op"] = "-"
    cp = json.loads(files.pop("checkpoint.json"))
    for key in ("source", "workspace"):
        cp.pop(key, None)
    return {
        "tree": tree_hash(worktree),
        "head": git.head(worktree),
        "events": records,
        "checkpoint": cp,
        "files": files,
        "checkpoints": sorted(p.name for p in (session.dir / "timeline" / "checkpoints").glob("*")),
        "stash": git.git("stash", "list", "--format=%s", cwd=worktree).splitlines(),
    }


def timeline_of(session: Session) -> list[Checkpoint]:
    """The checkpoints of the timeline itself, without the undo points (``before-``)."""
    from tilth.timeline import list_checkpoints

    return [c for c in list_checkpoints(session) if not c.is_before]
