"""SPEC §5.2 from outside: exit codes, worker and evaluator tool schemas, confinement, choice."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.lab import (
    ANSWER,
    EMPTY_MODEL,
    ERROR_MODEL,
    MUMBLING_EVALUATOR,
    QUIET_MODEL,
    SECRET,
    Lab,
    Live,
    bodies,
    probes,
    tool_names,
)
from tilth.demo.story import BRIEF

CATEGORIES = {
    "scope_creep",
    "acceptance_gap",
    "weak_test",
    "tests_pass_but_wrong",
    "half_finished",
    "spec_violation",
}


def _schemas(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"]["parameters"] for t in body["tools"]}


def _required(schema: dict[str, Any]) -> set[str]:
    return set(schema.get("required") or [])


def _implementing_request(lab: Lab) -> dict[str, Any]:
    return next(b for b in lab.notes["requests"]["worker"] if "submit_case" in tool_names(b))


def test_exit_0_when_all_tasks_are_done(lab: Lab) -> None:
    run = lab.notes["run"]
    assert run.returncode == 0
    assert "all_done" in run.stdout


def test_failed_task_halts_with_a_failed_placeholder_commit(failed: Live) -> None:
    subjects = failed.subjects(failed.seed_sha())
    assert len(subjects) == 1 and "FAILED (iter_cap)" in subjects[0], subjects
    assert "T-001" in subjects[0]


def test_failed_run_exit_code_is_3(lab: Lab) -> None:
    run = lab.notes["failed_run"]
    assert run.returncode == 3, run.stdout + run.stderr


def test_exit_130_on_ctrl_c(interrupted: Live, lab: Lab) -> None:
    run = lab.notes["interrupted_run"]
    assert run.returncode == 130, run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    assert interrupted.of_type("stop")[-1]["payload"]["reason"] == "interrupted"
    assert interrupted.record().status == "running"
    assert interrupted.statuses()["T-001"] == "in_progress"


def test_exit_1_on_a_model_error(prepared: Live) -> None:
    done = prepared.cli("run", str(prepared.proj), TILTH_WORKER_MODEL=ERROR_MODEL)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert any(line.startswith("error:") for line in done.stderr.splitlines()), done.stderr
    assert prepared.of_type("stop")[-1]["payload"]["reason"] == "error"


def test_worker_tool_schemas(lab: Lab) -> None:
    schemas = _schemas(_implementing_request(lab))
    expected = {
        "bash": {"command"},
        "read_file": {"path"},
        "write_file": {"path", "content"},
        "edit_file": {"path", "old_string", "new_string"},
        "glob": {"pattern"},
        "grep": {"pattern"},
        "submit_case": {"summary", "ac_coverage"},
    }
    for name, required in expected.items():
        assert name in schemas, name
        assert _required(schemas[name]) == required, (name, schemas[name])
    assert "path_glob" in schemas["grep"]["properties"]
    case = schemas["submit_case"]
    for optional in ("work_arounds", "uncertainties"):
        assert optional in case["properties"]
    coverage = case["properties"]["ac_coverage"]
    assert coverage["type"] == "array"
    assert _required(coverage["items"]) == {"criterion", "addressed_by"}
    assert "evidence" in coverage["items"]["properties"]


def test_stage_output_tool_schemas(lab: Lab) -> None:
    worker = lab.notes["requests"]["worker"]
    plan = next(b for b in worker if "submit_plan" in tool_names(b))
    assert _required(_schemas(plan)["submit_plan"]) == {"plan"}
    brainstorm = next(b for b in worker if "submit_brainstorm" in tool_names(b))
    assert _required(_schemas(brainstorm)["submit_brainstorm"]) == {"content"}


def test_evaluator_submit_verdict_schema(lab: Lab) -> None:
    body = lab.notes["requests"]["evaluator"][0]
    verdict = _schemas(body)["submit_verdict"]
    props = verdict["properties"]
    assert {"verdict", "rejection_category", "concern", "evidence", "next_step"} <= _required(
        verdict
    )
    assert set(props["verdict"]["enum"]) == {"accept", "reject"}
    category = props["rejection_category"]
    assert CATEGORIES <= set(category["enum"])
    nullable = None in category["enum"] or "null" in json.dumps(category.get("type"))
    assert nullable, category
    assert set(category["enum"]) - {None} == CATEGORIES
    assert props["concern"]["type"] == "string"
    assert props["evidence"]["type"] == "array"
    assert "null" in json.dumps(props["next_step"])


def _probe_results(lab: Lab) -> list[tuple[str, dict[str, Any], str]]:
    """(tool, arguments, full result text) for each escape probe of the story's T-001."""
    wanted = [(p["name"], p["arguments"]) for p in probes(lab.script.outside)]
    messages = [m for body in lab.notes["requests"]["worker"] for m in body["messages"]]
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    results: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call["function"]
            calls[call["id"]] = (function["name"], json.loads(function["arguments"]))
        if message.get("role") == "tool":
            results[message["tool_call_id"]] = str(message["content"])
    out = []
    for call_id, (name, arguments) in calls.items():
        if (name, arguments) in wanted and name != "bash":
            out.append((name, arguments, results[call_id]))
    return out


def test_every_path_tool_is_confined_to_the_worktree(lab: Lab) -> None:
    results = _probe_results(lab)
    tools = {name for name, _, _ in results}
    assert tools == {"read_file", "write_file", "edit_file", "glob", "grep"}
    assert len(results) == len([p for p in probes(lab.script.outside) if p["name"] != "bash"])
    for name, arguments, text in results:
        assert SECRET not in text, (name, arguments, text)
        assert "secret.txt" not in text or "escapes" in text or "ERROR" in text, (name, text)
        if name in ("read_file", "write_file", "edit_file"):
            assert "ERROR" in text or "error" in text.lower(), (name, arguments, text)
    outside = lab.script.outside
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == f"{SECRET}\n"


def test_several_prepared_sessions_refuse_and_list(prepared: Live) -> None:
    second = prepared.cli(
        "prep-feature", str(prepared.proj), "--brief", BRIEF, "--keep-existing", input_text=ANSWER
    )
    assert second.returncode == 0, second.stdout + second.stderr
    ids = prepared.session_ids()
    assert len(ids) == 2
    lengths = [len(prepared.events(sid)) for sid in ids]
    done = prepared.cli("run", str(prepared.proj))
    assert done.returncode == 2, done.stdout + done.stderr
    text = done.stdout + done.stderr
    assert all(sid in text for sid in ids), text
    assert [len(prepared.events(sid)) for sid in ids] == lengths
    assert all(prepared.checkpoint(sid)["status"] == "prepared" for sid in ids)


def test_run_with_no_prepared_session_exits_2_naming_the_next_command(blank: Live) -> None:
    from tests.conftest import make_repo

    proj = make_repo(blank.live / "proj")
    done = blank.cli("run", str(proj))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"tilth prep-feature {proj}" in done.stdout + done.stderr
    assert blank.session_ids() == []


def test_evaluator_cap_fails_the_task_after_that_many_rejections(prepared: Live) -> None:
    done = prepared.cli("run", str(prepared.proj), TILTH_MAX_EVALUATOR_CALLS_PER_TASK="1")
    assert done.returncode == 3, done.stdout + done.stderr
    failure = prepared.of_type("task_failed")[-1]["payload"]
    assert (failure["task_id"], failure["reason"]) == ("T-001", "evaluator_cap")
    assert prepared.of_type("stop")[-1]["payload"]["reason"] == "evaluator_cap"
    assert [e["payload"]["verdict"] for e in prepared.of_type("evaluator_verdict")] == ["reject"]
    assert prepared.record().status == "failed"


def test_token_cap_stops_the_run_resumably(prepared: Live) -> None:
    done = prepared.cli("run", str(prepared.proj), TILTH_MAX_TOKENS="20")
    assert done.returncode == 3, done.stdout + done.stderr
    assert prepared.of_type("stop")[-1]["payload"]["reason"] == "token_cap"
    assert prepared.record().status == "running"
    assert "failed" not in prepared.statuses().values()


def _text(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"])


def test_the_evaluator_sees_task_criteria_seed_test_validator_diff_and_ledger(lab: Lab) -> None:
    reviews = [
        b
        for b in lab.notes["requests"]["evaluator"]
        if "T-001" in _text(b) and "## Review: code_review" in _text(b)
    ]
    assert len(reviews) == 2  # rejected once, then accepted
    second = _text(reviews[1])
    assert "a blank string has 0 words" in second  # an acceptance criterion
    assert "def test_blank_text_has_no_words" in second  # the seed test
    assert "passed" in second  # the validator output
    assert "textutils/count.py" in second and "+def word_count" in second  # the diff
    assert "word_count has no docstring" in second  # the ledger: the earlier rejection


def test_the_worker_sees_the_plan_progress_and_its_ledger(lab: Lab) -> None:
    worker = lab.notes["requests"]["worker"]
    t002 = [b for b in worker if "Slugify" in _text(b) and "submit_case" in tool_names(b)]
    assert t002
    text = _text(t002[0])
    assert "Count words" in text and "Slugify" in text  # the full plan
    assert "T-001" in text and "done" in text  # progress
    rework = [
        b
        for b in worker
        if "submit_case" in tool_names(b) and "word_count has no docstring" in _text(b)
    ]
    assert rework, "the worker never saw its ledger's rejection"


@pytest.mark.parametrize(
    ("model", "reason"), [(EMPTY_MODEL, "empty_responses"), (QUIET_MODEL, "no_case")]
)
def test_empty_and_tool_less_workers_fail_the_task(prepared: Live, model: str, reason: str) -> None:
    done = prepared.cli("run", str(prepared.proj), TILTH_WORKER_MODEL=model)
    assert done.returncode == 3, done.stdout + done.stderr
    failure = prepared.of_type("task_failed")[-1]["payload"]
    assert (failure["task_id"], failure["reason"]) == ("T-001", reason)
    assert prepared.of_type("stop")[-1]["payload"]["reason"] == reason
    if model == QUIET_MODEL:
        assert prepared.of_type("nudge"), "a tool-less turn is nudged first"


def test_an_unparseable_review_is_retried_once_then_fails_closed(prepared: Live, lab: Lab) -> None:
    seen = len(bodies(lab.servers.evaluator))
    done = prepared.cli(
        "run",
        str(prepared.proj),
        TILTH_EVALUATOR_MODEL=MUMBLING_EVALUATOR,
        TILTH_MAX_EVALUATOR_CALLS_PER_TASK="1",
        TILTH_MAX_ITERATIONS_PER_TASK="12",
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert len(bodies(lab.servers.evaluator)) - seen == 2  # the review, and one retry
    verdicts = [e["payload"]["verdict"] for e in prepared.of_type("evaluator_verdict")]
    assert "accept" not in verdicts
    assert prepared.statuses()["T-001"] == "failed"
    assert "code_review" not in [e["payload"]["stage"] for e in prepared.of_type("stage_completed")]
