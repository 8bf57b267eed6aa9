"""A turn a stop cut short (between a model reply and its tool results) is finished on resume.

The web UI's stop and Ctrl-C can land while a turn's calls run. The scripted worker, as a
model might, takes a call it sees in its history for done: answered "not run", the
``write_file`` of its first implementing turn was never repeated, its case failed the gate
turn after turn, and the resumed run halted on the turn cap (exit 3) instead of finishing.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.agent.support import TASKS, model_env, recipes, seed_session, team_server, tilth
from tests.agent.test_pipeline_kit import GOOD_ADD, build, plan, quiet
from tests.warm_cli import PIPE, shared
from tilth.agent.pipeline import run_task
from tilth.demo.script import Team
from tilth.errors import ModelError
from tilth.model.script import Reply, tool_call
from tilth.timeline.record.checkpoints import list_checkpoints


class SleepBeforeWriting:
    """The working team, but its first reply that writes files runs ``sleep`` before them:
    the stop lands in the middle of that turn, after the reply, before the writes."""

    def __init__(self) -> None:
        self.team = Team(recipes())
        self.armed = True

    def __call__(self, model: str, request: dict[str, Any]) -> Reply:
        answer = self.team(model, request)
        calls = answer.get("tool_calls") or []
        if self.armed and any(call["name"] == "write_file" for call in calls):
            self.armed = False
            answer = {**answer, "tool_calls": [tool_call("bash", command="sleep 60"), *calls]}
        return answer


def test_a_run_stopped_mid_turn_finishes_on_resume(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    team = SleepBeforeWriting()
    with team_server(team) as server:
        env = {**os.environ, **model_env(server.base_url)}
        child = shared().popen(["run", str(repo)], stdout=PIPE, stderr=PIPE, env=env)
        deadline = time.monotonic() + 60
        while not any(
            e.type == "tool_call" and e.payload.get("tool") == "bash" for e in seeded.events()
        ):
            assert child.poll() is None and time.monotonic() < deadline, child.communicate()
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)  # during the sleep: the write_file has not run
        out, err = child.communicate(timeout=60)
        assert child.returncode == 130, out + err
        resumed = tilth("resume", seeded.session.id, env=env)
    events = [(e.type, e.payload) for e in seeded.events()]
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr + json.dumps(events)[-4000:]
    assert seeded.session.status == "all_done"
    answers = {p["call_id"]: p for t, p in events if t == "tool_result" and p["tool"] != "bash"}
    first_write = next(p for t, p in events if t == "tool_call" and p["tool"] == "write_file")
    assert not answers[first_write["call_id"]]["is_error"]  # run on resume, not "not run"
    turns = [p["turn"] for t, p in events if t == "model_call" and p.get("actor") == "worker"]
    assert turns == sorted(set(turns)), turns  # the cut turn counted once, never reused
    # The finished turn has its own checkpoint, holding its writes: going back to it does
    # not bring the next turn's changes too.
    cut = [
        c
        for c in list_checkpoints(seeded.session)
        if c.kind == "turn" and c.actor == "worker" and c.turn == first_write["turn"]
    ]
    assert [c.label.endswith("(finished on resume)") for c in cut] == [True], cut
    assert first_write["args"]["path"] in cut[0].files_changed, cut[0]


def test_each_unanswered_call_is_settled_by_what_it_is(tmp_path: Path) -> None:
    """A call that never started runs now; a repeatable one that started runs again; a
    ``bash`` cut off while it ran is answered as cut off, never run twice."""
    kit = build(tmp_path, [plan()], [])
    with pytest.raises(ModelError):  # the script ends: the stage stops after planning
        run_task(kit.ctx, kit.task())
    cut = kit.state().turns + 1
    calls = [
        ("c1", "bash", {"command": "touch ran-twice.txt"}),
        ("c2", "write_file", {"path": "started.py", "content": "A = 1\n"}),
        ("c3", "write_file", {"path": "calc.py", "content": GOOD_ADD}),
        ("c4", "edit_file", {"path": "calc.py", "old_string": "a + b", "new_string": "b + a"}),
    ]
    kit.session.threads.get("worker.T-001.implementing").append(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for i, n, a in calls
            ],
        },
        turn=cut,
    )
    scope = {"actor": "worker", "task_id": "T-001", "stage": "implementing", "turn": cut}
    for call_id, name, args in calls[:2]:  # these two had begun when the stop landed
        kit.session.log("tool_call", **scope, tool=name, call_id=call_id, args=args)

    again = kit.with_models([*quiet()], [])
    assert run_task(again.ctx, again.task()).reason == "no_case"
    sent = again.worker.requests[0]["messages"]
    answers = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    assert "cut off while it ran" in answers["c1"]
    assert not (kit.worktree / "ran-twice.txt").exists()
    assert (kit.worktree / "started.py").read_text() == "A = 1\n"
    assert "not run" not in answers["c3"] and "not run" not in answers["c4"], answers
    assert "return b + a" in (kit.worktree / "calc.py").read_text()
    assert [m["role"] for m in sent[-4:]] == ["tool"] * 4  # a finished turn needs no note
    worker_turns = [
        e.payload["turn"] for e in kit.events("model_call") if e.payload["actor"] == "worker"
    ]
    assert worker_turns[-len(again.worker.requests)] == cut + 1  # the cut turn counts


def test_a_submit_call_cut_off_is_answered_not_run(tmp_path: Path) -> None:
    """The stage's own submit call is not judged on resume: the model submits again."""
    kit = build(tmp_path, [plan()], [])
    with pytest.raises(ModelError):
        run_task(kit.ctx, kit.task())
    kit.session.threads.get("worker.T-001.implementing").append(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "s1",
                    "type": "function",
                    "function": {"name": "submit_case", "arguments": "{}"},
                }
            ],
        },
        turn=kit.state().turns + 1,
    )
    again = kit.with_models([*quiet()], [])
    assert run_task(again.ctx, again.task()).reason == "no_case"
    sent = again.worker.requests[0]["messages"]
    assert sent[-1]["tool_call_id"] == "s1" and "not run" in sent[-1]["content"]
