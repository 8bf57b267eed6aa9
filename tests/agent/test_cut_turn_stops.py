"""Stops that land in a turn's calls, twice in a row, through the real CLI (SIGINT).

A run stopped while one call of a reply runs, resumed, and stopped again while the resume
settles the rest of that reply's calls, must end as one uninterrupted run would: every call
answered once in the thread, none run twice, the big file written whole, turns counted once.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from tests.agent.support import GOOD, TASKS, model_env, seed_session, team_server, tilth
from tests.warm_cli import PIPE, WarmProcess, shared
from tilth.demo.script import Recipe, Team
from tilth.model.script import Reply, tool_call

FIRST, SECOND = "sleep 60", "sleep 61"
BIG = "".join(f"# line {n}: {'x' * 60}\n" for n in range(2_500))
"""About 180 KB, under ``write_file``'s cap: a big file the resume must write whole."""
WORDS = GOOD["T-001"]["textkit/words.py"] + BIG


class TwoSleepsBeforeWriting:
    """The working team, but its reply that writes the files first runs two ``sleep``s:
    the first stop lands in the first, the second (on resume) in the second."""

    def __init__(self) -> None:
        recipe = Recipe(files={"textkit/words.py": WORDS}, test_command="true")
        self.team = Team({"T-001": recipe})
        self.armed = True

    def __call__(self, model: str, request: dict[str, Any]) -> Reply:
        answer = self.team(model, request)
        calls = answer.get("tool_calls") or []
        if self.armed and any(call["name"] == "write_file" for call in calls):
            self.armed = False
            sleeps = [tool_call("bash", command=FIRST), tool_call("bash", command=SECOND)]
            answer = {**answer, "tool_calls": [*sleeps, *calls]}
        return answer


def _stop_when(child: WarmProcess, seeded: Any, command: str) -> None:
    """SIGINT ``child`` once the ``bash`` call running ``command`` has begun; expect exit 130."""
    deadline = time.monotonic() + 60
    while not any(
        e.type == "tool_call" and e.payload.get("args", {}).get("command") == command
        for e in seeded.events()
    ):
        assert child.poll() is None and time.monotonic() < deadline, child.communicate()
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 130, out + err


def test_two_stops_in_a_row_end_as_one_uninterrupted_run(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    with team_server(TwoSleepsBeforeWriting()) as server:
        # The big file is ~52,000 tokens: a reply limit that takes it whole (the fake server,
        # like llama.cpp, cuts a reply at max_tokens; this test is about stops, not limits).
        env = {**os.environ, **model_env(server.base_url, TILTH_MAX_REPLY_TOKENS="100000")}
        run = shared().popen(["run", str(repo)], stdout=PIPE, stderr=PIPE, env=env)
        _stop_when(run, seeded, FIRST)  # the second sleep and the write never started
        sid = seeded.session.id
        resume = shared().popen(["resume", sid], stdout=PIPE, stderr=PIPE, env=env)
        _stop_when(resume, seeded, SECOND)  # the resume was settling the cut turn's calls
        last = tilth("resume", sid, env=env)
    events = [(e.type, e.payload) for e in seeded.events()]
    shown = last.stdout + last.stderr + json.dumps(events)[-4000:]
    assert last.returncode == 0 and seeded.session.status == "all_done", shown
    assert (seeded.worktree / "textkit/words.py").read_text() == WORDS

    runs = [p["call_id"] for t, p in events if t == "tool_call" and p.get("actor") == "worker"]
    assert len(runs) == len(set(runs)), runs  # no call ran twice
    thread = seeded.session.threads.get("worker.T-001.implementing").messages()
    answered = [m["tool_call_id"] for m in thread if m.get("role") == "tool"]
    asked = [c["id"] for m in thread for c in m.get("tool_calls") or []]
    assert sorted(answered) == sorted(asked), (asked, answered)  # each call answered once
    answers = {m["tool_call_id"]: m["content"] for m in thread if m.get("role") == "tool"}
    by_command = {
        p["args"].get("command"): p["call_id"]
        for t, p in events
        if t == "tool_call" and p.get("tool") == "bash"
    }
    assert "cut off while it ran" in answers[by_command[FIRST]]
    assert "cut off while it ran" in answers[by_command[SECOND]]
    turns = [p["turn"] for t, p in events if t == "model_call" and p.get("actor") == "worker"]
    assert turns == sorted(set(turns)), turns  # the cut turn counted once, never reused
