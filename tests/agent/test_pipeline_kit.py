"""Set-up for the pipeline tests: a seeded session, a real worktree, scripted models.

The RunContext is built directly (no CLI), so each test drives ``run_task`` and
reads back commits, events, threads and the ledger. Seed tests are real pytest
files the pipeline really runs.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import make_repo
from tests.sessionview import SessionView
from tilth import git, git_worktrees
from tilth.agent.run_context import RunContext
from tilth.agent.task_state import TaskState
from tilth.config import Settings
from tilth.model import Script, ScriptedModel, reply, tool_call
from tilth.session.files import atomic_write_json
from tilth.session.store import Session
from tilth.session.task import Task
from tilth.timeline import Recorder

SECRET = "sk-pipeline-secret-0a1b2c3d4e"

CALC_TASK = {
    "id": "T-001",
    "title": "Add numbers",
    "description": "Add calc.add(a, b) returning the sum.",
    "acceptance_criteria": ["add(2, 3) == 5"],
}
CALC_TEST = (
    "tests/test_t001_add.py",
    "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
)
SUB_TASK = {
    "id": "T-002",
    "title": "Subtract numbers",
    "description": "Add calc.sub(a, b) returning the difference.",
    "acceptance_criteria": ["sub(5, 3) == 2"],
}
SUB_TEST = (
    "tests/test_t002_sub.py",
    "from calc import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n",
)
# The fixture project's own pytest config: skip the heavy plugins of Tilth's test venv, so
# each seed-test run the pipeline makes stays cheap.
PYTEST_INI = "[pytest]\naddopts = -p no:hypothesispytest -p no:timeout -p no:anyio\n"
GOOD_ADD = "def add(a, b):\n    return a + b\n"
BAD_ADD = "def add(a, b):\n    return a - b\n"


class CallLog:
    """Wraps the real Recorder and remembers which checkpoints the pipeline asked for."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.calls: list[tuple[str, dict[str, Any]]] = []

    @property
    def observer(self) -> Any:
        return self.recorder.observer

    def task_start(self, task_id: str) -> Any:
        self.calls.append(("task_start", {"task_id": task_id}))
        return self.recorder.task_start(task_id)

    def stage(self, task_id: str, stage: str) -> Any:
        self.calls.append(("stage", {"task_id": task_id, "stage": stage}))
        return self.recorder.stage(task_id, stage)

    def turn(self, actor: str, **kwargs: Any) -> Any:
        # what the checkpoint will capture: the task's state as saved at this instant
        done = TaskState.load(self.recorder.session, str(kwargs.get("task_id"))).stages_done
        self.calls.append(("turn", {"actor": actor, **kwargs, "stages_done": list(done)}))
        return self.recorder.turn(actor, **kwargs)

    def stop(self, reason: str) -> Any:
        self.calls.append(("stop", {"reason": reason}))
        return self.recorder.stop(reason)

    def close(self) -> None:
        self.recorder.close()


@dataclass
class Progress:
    """Records what the pipeline showed."""

    statuses: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def status(self, **kwargs: Any) -> None:
        self.statuses.append(kwargs)

    def note(self, text: str, style: str | None = None) -> None:
        self.notes.append(text)

    def on_delta(self, delta: Any) -> None:
        pass


@dataclass
class Kit(SessionView):
    """One seeded session plus the context the pipeline runs in."""

    ctx: RunContext
    session: Session
    worktree: Path
    seed_sha: str
    worker: ScriptedModel
    evaluator: ScriptedModel
    recorder: CallLog

    def task(self, task_id: str = "T-001") -> Task:
        return next(t for t in self.session.tasks() if t.id == task_id)

    def state(self, task_id: str = "T-001") -> TaskState:
        return TaskState.load(self.session, task_id)

    def subjects(self) -> list[str]:
        out = git.git("log", "--format=%s", f"{self.seed_sha}..HEAD", cwd=self.worktree)
        return list(reversed(out.splitlines()))

    def thread(self, key: str) -> list[dict[str, Any]]:
        return self.session.threads.get(key).messages()

    def with_models(self, worker: list[Any], evaluator: list[Any]) -> Kit:
        """The same session with fresh scripted models (as after a restart of the process)."""
        w = ScriptedModel(Script(worker), "worker")
        e = ScriptedModel(Script(evaluator), "evaluator")
        ctx = dataclasses.replace(self.ctx, worker=w, evaluator=e)
        return dataclasses.replace(self, ctx=ctx, worker=w, evaluator=e)

    def set_done(self, task_id: str) -> None:
        tasks = self.session.load_prd()
        for entry in tasks:
            if entry["id"] == task_id:
                entry["status"] = "done"
        self.session.save_prd(tasks)


def build(
    tmp_path: Path,
    worker: list[Any],
    evaluator: list[Any],
    *,
    tasks: list[dict[str, Any]] | None = None,
    tests: list[tuple[str, str]] | None = None,
    files: dict[str, str] | None = None,
    **settings: Any,
) -> Kit:
    """A seeded session on a fresh repository, and a RunContext with scripted models."""
    files = {**(files or {"README.md": "# calc\n", "calc.py": ""}), "pytest.ini": PYTEST_INI}
    source = make_repo(tmp_path / "repo", files)
    sessions_dir = tmp_path / "sessions"
    session = Session.create(sessions_dir, source)
    worktree = git_worktrees.ensure_worktree(source, session.workspace_dir, session.branch)
    for name, body in tests or [CALC_TEST]:
        (worktree / name).parent.mkdir(parents=True, exist_ok=True)
        (worktree / name).write_text(body)
    seed_sha = git.commit_all(worktree, "seed: test fixture")
    assert seed_sha is not None
    session.save_prd([{**t, "status": "pending"} for t in tasks or [CALC_TASK]])
    atomic_write_json(
        session.seed_meta_path,
        {"tldr": "a tiny calculator", "open_questions": ["negative numbers?"], "tokens": 7},
    )
    session.log("seed_committed", sha=seed_sha, branch=session.branch)
    session.update_checkpoint(workspace=str(worktree), branch=session.branch)
    base = {
        "max_iterations_per_task": 12,
        "empty_backoff_seconds": 0.0,
        "test_timeout_seconds": 60.0,
        "env": {"TILTH_API_KEY": SECRET},
    }
    base.update(settings)
    config = Settings(home=tmp_path / "home", sessions_dir=sessions_dir, **base)
    w = ScriptedModel(Script(worker), "worker")
    e = ScriptedModel(Script(evaluator), "evaluator")
    recorder = CallLog(Recorder(session, worktree, config))
    ctx = RunContext(
        session=session,
        settings=config,
        worktree=worktree,
        worker=w,
        evaluator=e,
        recorder=recorder,
        progress=Progress(),
        scripted=True,
        started=time.monotonic(),
    )
    return Kit(ctx, session, worktree, seed_sha, w, e, recorder)


# ---- scripted replies ---------------------------------------------------------------------------
def plan(text: str = "1. write calc.add") -> dict[str, Any]:
    return reply(None, tool_call("submit_plan", plan=text))


def brainstorm(text: str = "Use a plain function in calc.py.") -> dict[str, Any]:
    return reply(None, tool_call("submit_brainstorm", content=text))


def write(path: str, content: str) -> dict[str, Any]:
    return reply(None, tool_call("write_file", path=path, content=content))


def case(summary: str = "calc.add returns the sum") -> dict[str, Any]:
    return reply(
        None,
        tool_call(
            "submit_case",
            summary=summary,
            ac_coverage=[{"criterion": "add(2, 3) == 5", "addressed_by": "calc.py::add"}],
        ),
    )


def accept(concern: str = "meets the criteria") -> dict[str, Any]:
    return reply(
        None,
        tool_call(
            "submit_verdict",
            verdict="accept",
            rejection_category=None,
            concern=concern,
            evidence=["calc.py:1"],
            next_step=None,
        ),
    )


def reject(category: str = "weak_test", next_step: str = "handle negatives") -> dict[str, Any]:
    return reply(
        None,
        tool_call(
            "submit_verdict",
            verdict="reject",
            rejection_category=category,
            concern="REJECTION-CONCERN-MARKER",
            evidence=["calc.py:2"],
            next_step=next_step,
        ),
    )


def quiet() -> list[dict[str, Any]]:
    """Three tool-less turns: the worker gives up (``no_case``) without running any tests."""
    return [reply("thinking"), reply("still thinking"), reply("hmm")]


def happy_worker() -> list[Any]:
    return [plan(), write("calc.py", GOOD_ADD), case()]


def dumps(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, ensure_ascii=False)
