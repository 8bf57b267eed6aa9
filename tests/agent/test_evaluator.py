"""The evaluator: what it is shown, one retry on a bad reply, then fail closed."""

from __future__ import annotations

from pathlib import Path

from tests.agent.test_pipeline_kit import (
    GOOD_ADD,
    accept,
    build,
    case,
    dumps,
    happy_worker,
    reject,
    write,
)
from tilth.agent import prompts
from tilth.agent.pipeline import run_task
from tilth.model import reply, tool_call_raw
from tilth.session.task import Task


def test_evaluator_parse_failure_retries_once_then_fails_closed(tmp_path: Path) -> None:
    garbage = reply(None, tool_call_raw("submit_verdict", "{oops"))
    kit = build(
        tmp_path,
        [*happy_worker(), case("again")],
        [garbage, reply("I accept!")],
        max_evaluator_calls_per_task=1,
    )
    outcome = run_task(kit.ctx, kit.task())
    assert outcome.reason == "evaluator_cap"
    assert len(kit.evaluator.requests) == 2
    assert [e.payload["attempt"] for e in kit.events("evaluator_parse_error")] == [1, 2]
    # the retry saw the first error as the answer to its call
    retry = kit.evaluator.requests[1]["messages"]
    assert retry[-1]["role"] == "tool" and "could not be read" in retry[-1]["content"]
    assert retry[-2]["tool_calls"][0]["function"]["arguments"] == "{}", "kept as valid JSON"
    verdict = kit.events("evaluator_verdict")[0].payload
    assert verdict["verdict"] == "reject" and verdict["parse_failed"] is True
    assert kit.session.ledger.read("T-001")[0]["verdict"]["parse_failed"] is True
    assert kit.events("ledger_appended")[0].payload["verdict_summary"] == "reject"


def test_evaluator_retry_can_succeed(tmp_path: Path) -> None:
    kit = build(
        tmp_path, happy_worker(), [reply("no tool"), reject()], max_evaluator_calls_per_task=1
    )
    assert run_task(kit.ctx, kit.task()).reason == "evaluator_cap"
    verdict = kit.events("evaluator_verdict")[0].payload
    assert verdict["rejection_category"] == "weak_test" and "parse_failed" not in verdict
    retry = kit.evaluator.requests[1]["messages"]
    assert retry[-1]["role"] == "user" and "No `submit_verdict`" in retry[-1]["content"]


def test_evaluator_prompt_has_diff_seed_test_output_and_ledger(tmp_path: Path) -> None:
    kit = build(
        tmp_path,
        [*happy_worker(), case("v2")],
        [reject(), reject()],
        files={"README.md": "x\n", "calc.py": "", "AGENTS.md": "PROJECT-RULES-MARKER\n"},
        max_evaluator_calls_per_task=2,
    )
    assert run_task(kit.ctx, kit.task()).reason == "evaluator_cap"
    system, user = kit.evaluator.requests[1]["messages"][:2]
    assert system["role"] == "system" and "submit_verdict" in system["content"]
    text = user["content"]
    assert "+    return a + b" in text  # the diff
    assert "def test_add():" in text  # the seed test
    assert "1 passed" in text  # the test output
    assert "REJECTION-CONCERN-MARKER" in text  # the ledger
    assert "add(2, 3) == 5" in text  # the acceptance criteria
    assert text.count("calc.py::add") == 1  # the worker's case, shown once
    assert "1. write calc.add" in text  # the plan, from the earlier stages
    assert "PROJECT-RULES-MARKER" in text
    assert str(kit.worktree) not in dumps(kit.evaluator.requests[1]["messages"])
    assert kit.evaluator.requests[1]["tools"][0]["function"]["name"] == "submit_verdict"


def test_fences_cannot_be_closed_by_the_content() -> None:
    fenced = prompts.fence("a\n```\nb", "diff")
    assert fenced.startswith("````diff\n") and fenced.endswith("\n````")


def test_seed_tests_share_one_budget() -> None:
    tests = {
        "tests/test_t001_a.py": "x" * (prompts.SEED_TEST_CAP + 10),
        "tests/test_t001_b.py": "y",
    }
    text = prompts.seed_tests_text(tests)
    assert "truncated" in text and "budget is spent" in text


def test_the_task_heading_survives_a_blank_description() -> None:
    """The evaluator always learns which task it reviews, even when the seed left no prose."""
    brief = prompts.evaluator_brief(
        task=Task("T-007", "Tidy", "  ", ("x",)),
        stage="code_review",
        stages=("planning", "implementing", "code_review", "verifying"),
        outputs={},
        ledger=[],
        context=("", []),
        work="(case)",
        seed_tests="",
        gate_report="",
        diff="",
    )
    assert brief.startswith("# Task to evaluate: T-007 — Tidy")


def test_a_review_has_one_turn_label_its_checkpoint_shares(tmp_path: Path) -> None:
    """Finding 13 of #25: one review's events said `turn 4` (the worker's count) and `turn 1`."""
    again = [write("calc.py", GOOD_ADD + "# v2\n"), case("v2")]
    worker = [*happy_worker(), *again, write("calc.py", GOOD_ADD + "# v3\n"), case("v3")]
    # round 1 rejects; round 2 needs its retry (attempt 2) to reject; round 3 accepts
    evaluator = [reject(), reply("no tool"), reject("acceptance_gap"), accept()]
    kit = build(tmp_path, worker, evaluator, max_evaluator_calls_per_task=3)
    assert run_task(kit.ctx, kit.task()).status == "done"
    reviews = [e for e in kit.events() if e.payload.get("actor") == "evaluator"]
    rounds = {(e.payload["round"], e.payload["turn"]) for e in reviews if "round" in e.payload}
    assert rounds == {(1, 1), (2, 2), (3, 3)}, "prompt, verdict and ledger event agree"
    calls = [(e.payload["turn"], e.payload["attempt"]) for e in reviews if e.type == "model_call"]
    assert calls == [(1, 1), (2, 1), (2, 2), (3, 1)], "a retry is an attempt, not a turn"
    assert [e.payload["turn"] for e in reviews if e.type == "evaluator_parse_error"] == [2]
    answered = [e.payload["turn"] for e in reviews if e.payload.get("tool") == "submit_verdict"]
    assert answered == [1, 1, 2, 2, 3, 3]  # tool_call and tool_result of each verdict
    verdicts = [e.payload for e in kit.events("evaluator_verdict")]
    worker_turns = [e["turn"] for e in kit.session.ledger.read("T-001")]
    assert [v["worker_turns"] for v in verdicts] == worker_turns and worker_turns[0] > 1
    rejections = [c for n, c in kit.recorder.calls if n == "turn" and c["actor"] == "evaluator"]
    assert [c["turn"] for c in rejections] == [1, 2], "the checkpoint's label is the review's"
