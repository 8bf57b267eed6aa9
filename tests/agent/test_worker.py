"""The worker loop: turn budget, nudges, empty responses, malformed calls, prompts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent.test_pipeline_kit import (
    CALC_TASK,
    CALC_TEST,
    GOOD_ADD,
    SECRET,
    SUB_TASK,
    SUB_TEST,
    build,
    dumps,
    plan,
    quiet,
    write,
)
from tilth.agent import prompts
from tilth.agent.pipeline import run_task
from tilth.model import empty, reply, tool_call, tool_call_raw
from tilth.session.task import Task


def test_iter_cap_counts_every_worker_turn_of_the_task(tmp_path: Path) -> None:
    kit = build(
        tmp_path, [plan(), empty(), write("a.txt", "a"), reply("hm")], [], max_iterations_per_task=4
    )
    assert run_task(kit.ctx, kit.task()).reason == "iter_cap"
    assert len(kit.worker.requests) == 4


def test_no_case_nudges_twice_then_fails(tmp_path: Path) -> None:
    kit = build(tmp_path, [plan(), reply("a"), reply("b"), reply("c")], [])
    assert run_task(kit.ctx, kit.task()).reason == "no_case"
    nudges = kit.events("nudge")
    assert [e.payload["streak"] for e in nudges] == [1, 2]
    messages = kit.thread("worker.T-001.implementing")
    assert sum("submit_case" in m["content"] for m in messages if m["role"] == "user") >= 2


def test_empty_responses_are_logged_and_not_added_to_the_thread(tmp_path: Path) -> None:
    kit = build(tmp_path, [plan(), empty(), empty(), write("calc.py", GOOD_ADD), *quiet()], [])
    assert run_task(kit.ctx, kit.task()).reason == "no_case"
    assert [e.payload["streak"] for e in kit.events("empty_model_response")] == [1, 2]
    roles = [m["role"] for m in kit.thread("worker.T-001.implementing")][:4]
    assert roles == ["system", "user", "assistant", "tool"]  # the empty turns left no trace


def test_malformed_arguments_are_answered_not_raised(tmp_path: Path) -> None:
    worker = [
        plan(),
        reply(None, tool_call_raw("bash", '["ls", "-la"]')),
        reply(None, tool_call_raw("write_file", "{not json")),
        reply(None, tool_call_raw("submit_case", "[1, 2]")),
        reply(None, tool_call("submit_plan", plan="wrong stage")),
        *quiet(),
    ]
    kit = build(tmp_path, worker, [])
    assert run_task(kit.ctx, kit.task()).reason == "no_case"
    answers = [m["content"] for m in kit.thread("worker.T-001.implementing") if m["role"] == "tool"]
    assert "must be a JSON object" in answers[0]
    assert "not valid JSON" in answers[1]
    assert "could not be accepted" in answers[2]
    assert "unknown tool 'submit_plan'" in answers[3]
    assert kit.events("case_parse_error")


def test_worker_prompt_channels_and_no_absolute_paths(tmp_path: Path) -> None:
    kit = build(
        tmp_path,
        [plan(), *quiet()],
        [],
        tasks=[CALC_TASK, SUB_TASK],
        tests=[CALC_TEST, SUB_TEST],
        files={"README.md": "x\n", "calc.py": "", "CLAUDE.md": "CONTEXT-MARKER\n"},
    )
    kit.session.progress_path.write_text("T-000\tdone\tearlier work\n")
    assert run_task(kit.ctx, kit.task()).reason == "no_case"
    first = kit.worker.requests[0]
    brief = first["messages"][1]["content"]
    assert "CONTEXT-MARKER" in brief
    assert "earlier work" in brief
    assert "context, not work to do" in brief and "Subtract numbers" in brief
    assert "a tiny calculator" not in brief and "negative numbers?" not in brief  # seed-meta
    assert "tests/test_t001_add.py" in brief
    assert str(kit.worktree) not in dumps(first["messages"])
    assert str(kit.session.dir) not in dumps(first["messages"])
    tools = {t["function"]["name"] for t in first["tools"]}
    assert tools == {"bash", "read_file", "write_file", "edit_file", "glob", "grep", "submit_plan"}
    implementing = kit.worker.requests[1]
    assert "1. write calc.add" in implementing["messages"][1]["content"]
    assert "submit_case" in {t["function"]["name"] for t in implementing["tools"]}


def test_worker_bash_does_not_see_api_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_API_KEY", SECRET)
    worker = [
        plan(),
        reply(None, tool_call("bash", command="env")),
        *quiet(),
    ]
    kit = build(tmp_path, worker, [])
    assert run_task(kit.ctx, kit.task()).reason == "no_case"
    assert "PATH=" in dumps(kit.thread("worker.T-001.implementing"))
    assert SECRET not in dumps(kit.thread("worker.T-001.implementing"))


def test_a_thread_stopped_before_its_brief_is_opened_afresh(tmp_path: Path) -> None:
    """A stop between the system prompt and the brief left a thread without the task: the
    worker was asked with no task in sight, and the stage failed with ``no_case``."""
    kit = build(tmp_path, [plan(), *quiet()], [])
    half = kit.session.threads.get("worker.T-001.implementing")
    half.append({"role": "system", "content": "HALF-OPENED"}, turn=1)
    assert run_task(kit.ctx, kit.task()).reason == "no_case"
    sent = kit.worker.requests[1]["messages"]
    assert [m["role"] for m in sent[:2]] == ["system", "user"]
    assert "T-001" in sent[1]["content"] and "HALF-OPENED" not in dumps(sent)


def test_brief_channels_are_capped_and_curated(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("A" * 5_000)
    (tmp_path / "CLAUDE.md").write_text("C" * 5_000)
    text, loaded = prompts.context_files(tmp_path, ("AGENTS.md", "MISSING.md", "CLAUDE.md"))
    assert loaded == ["AGENTS.md", "CLAUDE.md"]
    assert text.startswith("### AGENTS.md") and "project context truncated" in text
    assert len(text) < prompts.CONTEXT_FILES_CAP + 100
    progress = tmp_path / "progress.txt"
    progress.write_text("".join(f"T-{n:03d}\tdone\tt{n}\n" for n in range(50)))
    tail = prompts.progress_tail(progress)
    assert tail.splitlines()[0].startswith("T-020") and tail.endswith("t49")
    plan_text = prompts.full_plan(
        [
            Task("T-001", "one", "D1", ("a",)),
            Task("T-002", "two", "D2", status="done"),
        ],
        "T-001",
    )
    assert "### T-001 — one  [pending]  ← your task" in plan_text and "D1" not in plan_text
    assert "### T-002 — two  [done]\nD2" in plan_text


def test_a_thread_left_on_an_assistant_message_gets_a_resume_note(tmp_path: Path) -> None:
    kit = build(tmp_path, [plan(), *quiet()], [])
    assert run_task(kit.ctx, kit.task()).reason == "no_case"
    assert kit.thread("worker.T-001.implementing")[-1]["role"] == "assistant"
    again = kit.with_models([*quiet()], [])
    run_task(again.ctx, again.task())
    sent = again.worker.requests[0]["messages"]
    assert sent[-1]["role"] == "user" and "resumed this stage" in sent[-1]["content"]


def test_empty_responses_back_off_longer_each_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []
    monkeypatch.setattr("tilth.agent.worker.sleep", slept.append)
    kit = build(tmp_path, [plan(), empty(), empty(), empty()], [], empty_backoff_seconds=0.5)
    assert run_task(kit.ctx, kit.task()).reason == "empty_responses"
    assert slept == [0.5, 1.0]  # no wait after the streak that fails the task


def test_the_same_submit_call_repeated_in_one_reply_runs_the_gate_once(tmp_path: Path) -> None:
    """A small model sent one ``submit_case`` six times in a reply: the seed tests ran six
    times on the same worktree and counted six failed gates, and best of N, which prefers
    fewer failed gates, held that stutter against the attempt."""
    submit = tool_call(
        "submit_case",
        summary="calc.add returns the sum",
        ac_coverage=[{"criterion": "add(2, 3) == 5", "addressed_by": "calc.py::add"}],
    )
    other = tool_call("submit_case", summary="another try", ac_coverage=[])
    worker = [plan(), reply(None, submit, submit, other, submit), *quiet()]
    kit = build(tmp_path, worker, [])
    assert run_task(kit.ctx, kit.task()).reason == "no_case"
    # The first call and the one with other arguments are judged; the repeats are not.
    assert [e.payload["passed"] for e in kit.events("tests_run")] == [False, False]
    answers = [m["content"] for m in kit.thread("worker.T-001.implementing") if m["role"] == "tool"]
    assert len(answers) == 4
    assert "acceptance tests fail" in answers[0] and "acceptance tests fail" in answers[2]
    assert (
        answers[1]
        == answers[3]
        == "Duplicate `submit_case` call ignored; act on the response to the first one."
    )
