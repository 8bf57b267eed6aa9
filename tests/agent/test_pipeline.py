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
    SECRET,
    SUB_TASK,
    SUB_TEST,
    accept,
    brainstorm,
    build,
    case,
    dumps,
    happy_worker,
    plan,
    reject,
    write,
)
from tilth import git
from tilth.agent.pipeline import TaskOutcome, run_task
from tilth.agent.run_context import StopRun
from tilth.errors import ModelError
from tilth.model import empty, error, reply, tool_call, tool_call_raw


def quiet() -> list[dict]:
    """Three tool-less turns: the worker gives up (``no_case``) without running any tests."""
    return [reply("thinking"), reply("still thinking"), reply("hmm")]


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
    assert "DESIGN-NOTE-MARKER" in design_prompt
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
    assert retry[-1]["role"] == "tool" and "could not be parsed" in retry[-1]["content"]
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
    assert "calc.py::add" in text  # the worker's case
    assert "PROJECT-RULES-MARKER" in text
    assert str(kit.worktree) not in dumps(kit.evaluator.requests[1]["messages"])
    assert kit.evaluator.requests[1]["tools"][0]["function"]["name"] == "submit_verdict"


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
    assert "a tiny calculator" in brief and "negative numbers?" in brief
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


def test_dangling_tool_calls_are_answered_before_continuing(tmp_path: Path) -> None:
    kit = build(tmp_path, [plan()], [])
    with pytest.raises(ModelError):
        run_task(kit.ctx, kit.task())
    # simulate a crash right after a model reply was stored, before its tool ran
    thread = kit.session.threads.get("worker.T-001.implementing")
    thread.append(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c9", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            ],
        }
    )
    again = kit.with_models([*quiet()], [])
    assert run_task(again.ctx, again.task()).reason == "no_case"
    sent = again.worker.requests[0]["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": "c9", "content": sent[-1]["content"]}
    assert "not run" in sent[-1]["content"]


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
