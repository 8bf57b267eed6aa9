"""Checkpoint files of a many-task scripted run: how their size grows with the tasks done.

A scripted team (the demo's, one small recipe per task) prepares and runs a session of
``--tasks`` tasks (``TILTH_BENCH_TASKS``, default 35) in-process. Printed: the number of
checkpoints, the bytes of ``timeline/checkpoints``, the first and last task's mean
checkpoint file size, and what each further task adds to a checkpoint. A checkpoint refers
to each task's state and the prd by blob id, so a task done adds one reference (about 80
bytes) to every later checkpoint, not its whole state.

Goal: a task done adds at most 400 bytes to a checkpoint file (its state's id is ~75; the
heads of its threads, which every checkpoint lists, most of the rest). Inline (schema 2) it
added ~3.8 kB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tilth.demo.script import Team

GOAL_BYTES_PER_TASK = 400


def team(tasks: int, python: str) -> tuple[Team, list[str]]:
    """A scripted team for ``tasks`` small tasks, and the answers to its interview."""
    from tilth.demo.script import Interview, Recipe, Team
    from tilth.demo.story import test_command

    run = test_command(python).replace(" {files}", "")
    recipes = {}
    entries = []
    tests = {}
    for n in range(1, tasks + 1):
        tid = f"T-{n:03d}"
        module = f"textutils/step{n:03d}.py"
        recipes[tid] = Recipe(
            files={module: f'def step{n}() -> int:\n    """Step {n}."""\n    return {n}\n'},
            test_command=f"{run} tests/test_t{n:03d}_step.py",
        )
        entries.append(
            {
                "id": tid,
                "title": f"Step {n}",
                "description": f"Add textutils.step{n:03d}.step{n}() returning {n}.",
                "acceptance_criteria": [f"step{n}() returns {n}", "it has a docstring"],
            }
        )
        tests[f"test_t{n:03d}_step.py"] = (
            f"from textutils.step{n:03d} import step{n}\n\n\n"
            f"def test_step{n}() -> None:\n    assert step{n}() == {n}\n"
        )
    interview = Interview(
        question="Should the steps be numbered from one?",
        options=["yes", "no"],
        prd_entries=entries,
        test_files=tests,
        tldr=f"- {tasks} numbered steps for textutils (scripted)",
    )
    return Team(recipes=recipes, interview=interview), ["1"]


def scripted_run(work: Path, tasks: int) -> Path:
    """Prepare and run a ``tasks``-task session under ``work``; its directory."""
    import tilth
    from tilth.demo.story import test_command
    from tilth.demo.tour import PROJECT

    settings = tilth.load_settings(
        {
            "TILTH_HOME": str(work / "home"),
            "TILTH_TEST_COMMAND": test_command(sys.executable),
            "TILTH_SANDBOX": "off",
            "TILTH_CHECKPOINT_AUTO_GC": "0",
        }
    )
    project = work / "textutils"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@example.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    }
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "initial"]):
        subprocess.run(["git", *args], cwd=project, check=True, env=env)
    the_team, answers = team(tasks, sys.executable)
    script = tilth.Script(the_team)
    session = tilth.prepare(
        project,
        brief=f"Add {tasks} numbered steps.",
        model=tilth.ScriptedModel(script, "interviewer"),
        answers=answers,
        settings=settings,
    )
    stop = tilth.run(
        session,
        worker=tilth.ScriptedModel(script, "worker"),
        evaluator=tilth.ScriptedModel(script, "evaluator"),
        settings=settings,
    )
    if stop.reason != "all_done":
        raise SystemExit(f"the run stopped with {stop.reason}: {stop}")
    return session.dir


def measure(session_dir: Path) -> dict[str, float]:
    """Sizes of the run's checkpoint files: total, last, per task done."""
    import json

    folder = session_dir / "timeline" / "checkpoints"
    files = sorted(folder.glob("cp-*.json"))
    by_task: dict[str, list[int]] = {}
    for path in files:
        data = json.loads(path.read_text("utf-8"))
        if data.get("task_id"):
            by_task.setdefault(str(data["task_id"]), []).append(path.stat().st_size)
    order = sorted(by_task)
    first = sum(by_task[order[0]]) / len(by_task[order[0]])
    last = sum(by_task[order[-1]]) / len(by_task[order[-1]])
    return {
        "checkpoints": len(files),
        "total": sum(p.stat().st_size for p in files),
        "last": files[-1].stat().st_size,
        "first_task_mean": first,
        "last_task_mean": last,
        "per_task": (last - first) / max(1, len(order) - 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=int(os.environ.get("TILTH_BENCH_TASKS", 35)))
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tilth-cp-size-"))
    try:
        figures = measure(scripted_run(work, args.tasks))
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{args.tasks} tasks: {figures['checkpoints']:.0f} checkpoints")
    print(f"  timeline/checkpoints: {figures['total'] / 1e6:.2f} MB")
    print(f"  last checkpoint file: {figures['last'] / 1e3:.1f} kB")
    print(
        f"  mean checkpoint of the first task {figures['first_task_mean'] / 1e3:.1f} kB, "
        f"of the last {figures['last_task_mean'] / 1e3:.1f} kB"
    )
    print(
        f"  each task done adds {figures['per_task']:.0f} bytes to a checkpoint "
        f"(goal <= {GOAL_BYTES_PER_TASK})"
    )
    return 0 if figures["per_task"] <= GOAL_BYTES_PER_TASK else 1


if __name__ == "__main__":
    sys.exit(main())
