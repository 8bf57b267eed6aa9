"""The task pipeline end to end: stages, commits, rejections, failures, continuation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.agent.test_pipeline_kit import (
    BAD_ADD,
    CALC_TASK,
    CALC_TEST,
    GOOD_ADD,
    SUB_TASK,
    SUB_TEST,
    accept,
    brainstorm,
    build,
    case,
    dumps,
    happy_worker,
    plan,
    quiet,
    reject,
    write,
)
from tilth import git
from tilth.agent.pipeline import TaskOutcome, run_task
from tilth.agent.stops import StopRun
from tilth.errors import ModelError
from tilth.model import empty, error, reply, tool_call

L1 = ["planning", "implementing", "code_review", "verifying"]
L2 = ["brainstorming", "design_review", "planning", "implementing", "code_review", "verifying"]


def commits_for(stages: list[str], task_id: str = "T-001") -> list[str]:
    return [f"task/{task_id}: complete {stage} stage" for stage in stages]


def test_l1_task_runs_its_four_stages_with_one_commit_each(tmp_path: Path) -> None:
    kit = build(tmp_path, happy_worker(), [accept()])
    outcome = run_task(kit.ctx, kit.task())
    assert outcome == TaskOutcome("done", None, "calc.add returns the sum")
    assert kit.subjects() == commits_for(L1)
    completed = kit.events("stage_completed")
    assert [e.payload["stage"] for e in completed] == L1
    shas = git.git("log", "--format=%H", f"{kit.seed_sha}..HEAD", cwd=kit.worktree).split()
    assert [e.payload["sha"] for e in completed] == list(reversed(shas))
    state = kit.state()
    assert state.stages_done == L1
    assert state.stage_commits["verifying"] == git.head(kit.worktree)
    assert state.base_commit == kit.seed_sha
    assert state.outputs["planning"] == "1. write calc.add"
    assert state.outputs["code_review"]["verdict"] == "accept"
    assert state.outputs["verifying"]["passed"] is True
    assert (kit.worktree / "calc.py").read_text() == GOOD_ADD
    # the implementation landed in the implementing commit; later stages are empty commits
    changed = git.git(
        "show", "--name-only", "--format=", state.stage_commits["implementing"], cwd=kit.worktree
    )
    assert changed.split() == ["calc.py"]
    start = kit.events("task_start")[0].payload
    assert start == {
        "task_id": "T-001",
        "title": "Add numbers",
        "tier": "L1",
        "stages": L1,
        "base_commit": kit.seed_sha,
    }
    assert kit.session.load_prd()[0]["status"] == "in_progress"  # the outer loop marks done
    kinds = [name for name, _ in kit.recorder.calls]
    assert kinds[0] == "task_start"
    assert [c["stage"] for n, c in kit.recorder.calls if n == "stage"] == L1
    turns = [c for n, c in kit.recorder.calls if n == "turn" and c["actor"] == "worker"]
    assert [c["turn"] for c in turns] == [1, 2, 3]
    # an accepting turn's checkpoint already has its stage done, so going back to it never
    # replays the submission
    assert [c["stages_done"] for c in turns] == [["planning"], ["planning"], L1[:2]]
    assert kit.state().turns == 3


def test_l2_task_brainstorms_and_passes_design_review_first(tmp_path: Path) -> None:
    task = {**CALC_TASK, "tier": "L2"}
    worker = [brainstorm("DESIGN-NOTE-MARKER"), *happy_worker()]
    kit = build(tmp_path, worker, [accept("design ok"), accept()], tasks=[task])
    assert run_task(kit.ctx, kit.task()).status == "done"
    assert kit.subjects() == commits_for(L2)
    design_prompt = dumps(kit.evaluator.requests[0]["messages"])
    assert design_prompt.count("DESIGN-NOTE-MARKER") == 1
    assert "design_review" in design_prompt
    # the planning stage sees the brainstorm and the design review
    planning_brief = kit.thread("worker.T-001.planning")[1]["content"]
    assert "DESIGN-NOTE-MARKER" in planning_brief
    assert "design ok" in planning_brief


def test_default_tier_setting_picks_l2(tmp_path: Path) -> None:
    kit = build(tmp_path, [*quiet()], [], default_tier="L2")
    assert run_task(kit.ctx, kit.task()).reason == "no_case"
    assert kit.events("task_start")[0].payload["stages"] == L2
    assert kit.state().current_stage == "brainstorming"
    tools = {t["function"]["name"] for t in kit.worker.requests[0]["tools"]}
    assert "submit_brainstorm" in tools


def test_code_review_rejection_returns_to_implementing_with_feedback(tmp_path: Path) -> None:
    worker = [*happy_worker(), write("calc.py", GOOD_ADD + "# negatives ok\n"), case("v2")]
    kit = build(tmp_path, worker, [reject(), accept()])
    outcome = run_task(kit.ctx, kit.task())
    assert outcome.status == "done" and outcome.summary == "v2"
    assert kit.subjects() == commits_for(
        ["planning", "implementing", "implementing", "code_review", "verifying"]
    )
    # the feedback reached the implementing thread, not a new conversation
    messages = kit.thread("worker.T-001.implementing")
    feedback = [
        m for m in messages if m["role"] == "user" and "REJECTION-CONCERN-MARKER" in m["content"]
    ]
    assert len(feedback) == 1
    assert "weak_test" in feedback[0]["content"] and "handle negatives" in feedback[0]["content"]
    fifth_request = dumps(kit.worker.requests[3]["messages"])
    assert "REJECTION-CONCERN-MARKER" in fifth_request
    ledger = kit.session.ledger.read("T-001")
    assert [e["verdict"]["verdict"] for e in ledger] == ["reject", "accept"]
    assert ledger[0]["stage"] == "code_review" and ledger[0]["diff_summary"].startswith("1 file")
    assert ledger[0]["case"]["summary"] == "calc.add returns the sum"
    delivered = kit.events("feedback_delivered")[0].payload
    assert delivered["stage"] == "implementing" and "REJECTION-CONCERN" in delivered["preview"]
    rejected = kit.events("stage_rejected")[0].payload
    assert (
        rejected["back_to"] == "implementing" and rejected["verdict_summary"] == "reject:weak_test"
    )
    # the second review sees the first one in its prior iterations
    second = dumps(kit.evaluator.requests[1]["messages"])
    assert "REJECTION-CONCERN-MARKER" in second and "Prior iterations" in second
    assert kit.state().rejections == 1
    assert kit.state().stage_commits["implementing"] == git.rev_parse("HEAD~2", kit.worktree)


def test_design_review_rejection_returns_to_brainstorming(tmp_path: Path) -> None:
    task = {**CALC_TASK, "tier": "L2"}
    worker = [brainstorm("first idea"), brainstorm("second idea"), *happy_worker()]
    kit = build(
        tmp_path, worker, [reject("scope_creep", "drop the CLI"), accept(), accept()], tasks=[task]
    )
    assert run_task(kit.ctx, kit.task()).status == "done"
    assert kit.subjects() == commits_for(["brainstorming", *L2])
    brainstorm_thread = dumps(kit.thread("worker.T-001.brainstorming"))
    assert "drop the CLI" in brainstorm_thread
    assert kit.state().outputs["brainstorming"] == "second idea"
    second_review = dumps(kit.evaluator.requests[1]["messages"])
    assert "second idea" in second_review


def test_failing_seed_tests_go_back_to_the_worker_not_the_evaluator(tmp_path: Path) -> None:
    worker = [plan(), write("calc.py", BAD_ADD), case(), write("calc.py", GOOD_ADD), case()]
    kit = build(tmp_path, worker, [accept()])
    assert run_task(kit.ctx, kit.task()).status == "done"
    assert len(kit.evaluator.requests) == 1
    runs = kit.events("tests_run")
    assert [(e.payload["stage"], e.payload["passed"]) for e in runs] == [
        ("implementing", False),
        ("implementing", True),
        ("verifying", True),
    ]
    assert runs[0].payload["files"] == ["tests/test_t001_add.py"]
    assert "assert" in runs[0].payload["output_preview"]
    answers = [m for m in kit.thread("worker.T-001.implementing") if m["role"] == "tool"]
    failed_answer = answers[1]["content"]
    assert "acceptance tests fail" in failed_answer and "FAIL" in failed_answer
    # no test cache or bytecode was committed
    tracked = git.git("ls-files", cwd=kit.worktree).split()
    assert not [p for p in tracked if "__pycache__" in p or ".pytest_cache" in p]


def test_verifying_ratchet_failure_returns_to_implementing(tmp_path: Path) -> None:
    # T-001 is done; T-002's worker breaks add() — its own test passes, the ratchet does not.
    sub_only = "def add(a, b):\n    return 0\n\n\ndef sub(a, b):\n    return a - b\n"
    both = GOOD_ADD + "\n\ndef sub(a, b):\n    return a - b\n"
    worker = [plan(), write("calc.py", sub_only), case(), write("calc.py", both), case()]
    kit = build(
        tmp_path,
        worker,
        [accept(), accept()],
        tasks=[CALC_TASK, SUB_TASK],
        tests=[CALC_TEST, SUB_TEST],
        files={"README.md": "x\n", "calc.py": GOOD_ADD},
    )
    kit.set_done("T-001")
    assert run_task(kit.ctx, kit.task("T-002")).status == "done"
    verifying = [e.payload for e in kit.events("tests_run") if e.payload["stage"] == "verifying"]
    assert [v["passed"] for v in verifying] == [False, True]
    assert verifying[0]["files"] == ["tests/test_t001_add.py", "tests/test_t002_sub.py"]
    assert kit.subjects() == commits_for(
        ["planning", "implementing", "code_review", "implementing", "code_review", "verifying"],
        "T-002",
    )
    thread = dumps(kit.thread("worker.T-002.implementing"))
    assert "Verification failed" in thread
    # a failed check is not an evaluator rejection
    assert kit.state("T-002").rejections == 0


def test_lint_command_is_part_of_the_ratchet(tmp_path: Path) -> None:
    fix = reply(None, tool_call("bash", command="rm LINT_FAILS"))
    kit = build(
        tmp_path,
        [*happy_worker(), fix, case("again")],
        [accept(), accept()],
        lint_command="test ! -e LINT_FAILS || { echo lint-broke; exit 1; }",
        files={"README.md": "x\n", "calc.py": "", "LINT_FAILS": ""},
    )
    assert run_task(kit.ctx, kit.task()).status == "done"
    checks = [e.payload for e in kit.events("tests_run") if e.payload["stage"] == "verifying"]
    assert [c["passed"] for c in checks] == [False, True]
    assert [c["name"] for c in checks[0]["checks"]] == ["pytest", "lint"]
    assert "lint-broke" in dumps(kit.thread("worker.T-001.implementing"))


@pytest.mark.parametrize(
    ("worker", "evaluator", "settings", "reason"),
    [
        ([plan(), *[write("notes.txt", "x")] * 5], [], {"max_iterations_per_task": 4}, "iter_cap"),
        ([*happy_worker()], [reject()], {"max_evaluator_calls_per_task": 1}, "evaluator_cap"),
        ([plan(), empty(), empty(), empty()], [], {}, "empty_responses"),
        ([plan(), reply("thinking"), reply("still"), reply("done?")], [], {}, "no_case"),
    ],
)
def test_each_failure_reason(
    tmp_path: Path, worker: list, evaluator: list, settings: dict, reason: str
) -> None:
    kit = build(tmp_path, worker, evaluator, **settings)
    outcome = run_task(kit.ctx, kit.task())
    assert outcome.status == "failed" and outcome.reason == reason
    assert kit.state().failure == reason
    stopped = kit.events("task_attempt_failed")[-1].payload
    assert stopped["reason"] == reason
    # the pipeline never commits a failure; the outer loop writes the placeholder
    assert "FAILED" not in " ".join(kit.subjects())


def test_stop_mid_stage_continues_the_thread_and_skips_done_stages(tmp_path: Path) -> None:
    # first process: planning done, one implementing turn, then the model endpoint fails
    kit = build(tmp_path, [plan(), write("calc.py", GOOD_ADD), error(500)], [])
    with pytest.raises(ModelError):
        run_task(kit.ctx, kit.task())
    state = kit.state()
    assert state.stages_done == ["planning"] and state.current_stage == "implementing"
    assert state.turns == 2
    before = kit.thread("worker.T-001.implementing")
    # second process: only the rest of the implementing stage is scripted
    again = kit.with_models([case()], [accept()])
    assert run_task(again.ctx, again.task()).status == "done"
    after = again.thread("worker.T-001.implementing")
    assert after[: len(before)] == before  # continued, not restarted
    sent = again.worker.requests[0]["messages"]
    assert sent == before  # the model saw the whole persisted thread
    assert again.subjects() == commits_for(L1)
    assert len(again.events("task_start")) == 1
    started = [e.payload for e in again.events("stage_started")]
    assert {"task_id": "T-001", "stage": "implementing", "resumed": True} in started
    assert again.state().turns == 3
    turns = [c["turn"] for n, c in again.recorder.calls if n == "turn" and c["actor"] == "worker"]
    assert turns == [1, 2, 3]


def test_stop_run_between_turns_is_resumable(tmp_path: Path) -> None:
    kit = build(
        tmp_path, [plan(), write("calc.py", GOOD_ADD), case()], [accept()], max_tokens=30
    )  # each scripted turn costs 15 tokens
    with pytest.raises(StopRun) as stop:
        run_task(kit.ctx, kit.task())
    assert stop.value.reason == "token_cap"
    assert kit.state().turns == 2
    resumed = kit.with_models([*quiet()], [])
    resumed.ctx = dataclasses.replace(
        resumed.ctx, settings=dataclasses.replace(resumed.ctx.settings, max_tokens=0)
    )
    assert run_task(resumed.ctx, resumed.task()).reason == "no_case"
    assert resumed.state().turns == 5
    assert resumed.state().stages_done == ["planning"]


def test_a_retry_after_failure_gets_fresh_budgets(tmp_path: Path) -> None:
    kit = build(tmp_path, [plan(), *quiet()], [], max_iterations_per_task=5)
    assert run_task(kit.ctx, kit.task()).reason == "no_case"
    assert kit.state().turns == 4
    # without a fresh budget the retry would hit iter_cap after one turn
    again = kit.with_models([*quiet()], [])
    assert run_task(again.ctx, again.task()).reason == "no_case"
    assert again.events("task_retry")[0].payload["previous_failure"] == "no_case"
    assert again.state().turns == 3 and again.state().stages_done == ["planning"]
    assert again.subjects() == commits_for(["planning"])


def test_a_stage_done_but_not_committed_is_committed_on_the_next_start(tmp_path: Path) -> None:
    kit = build(tmp_path, [plan(), error(500)], [])
    with pytest.raises(ModelError):
        run_task(kit.ctx, kit.task())
    # as if the process died between saving the state and committing the stage
    git.reset_hard(kit.worktree, kit.seed_sha)
    state = kit.state()
    state.stage_commits.clear()
    state.save(kit.session)
    again = kit.with_models([error(500)], [])
    with pytest.raises(ModelError):
        run_task(again.ctx, again.task())
    assert again.subjects() == commits_for(["planning"])
    assert again.state().stage_commits["planning"] == git.head(kit.worktree)
    assert len(again.events("stage_completed")) == 2
