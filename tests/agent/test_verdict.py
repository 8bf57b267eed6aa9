"""The evaluator's verdict: schema, strict parsing, fail-closed fallback, feedback text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tilth.agent.verdict import (
    REJECTION_CATEGORIES,
    SUBMIT_VERDICT_SCHEMA,
    fallback_verdict,
    format_ledger,
    format_reject_feedback,
    parse_verdict,
    validate_verdict,
    verdict_summary,
)
from tilth.model.base import ToolCall

ACCEPT = {
    "verdict": "accept",
    "rejection_category": None,
    "concern": "fine",
    "evidence": ["calc.py:1"],
    "next_step": None,
}
REJECT = {
    "verdict": "reject",
    "rejection_category": "weak_test",
    "concern": "the test is trivial",
    "evidence": ["tests/test_t001_add.py:4"],
    "next_step": "cover negatives",
}


def call(arguments: Any, name: str = "submit_verdict") -> ToolCall:
    return ToolCall("v1", name, arguments if isinstance(arguments, str) else json.dumps(arguments))


def test_schema_matches_the_contract() -> None:
    function = SUBMIT_VERDICT_SCHEMA["function"]
    assert function["name"] == "submit_verdict"
    props = function["parameters"]["properties"]
    assert props["verdict"]["enum"] == ["accept", "reject"]
    assert props["rejection_category"]["enum"] == [*REJECTION_CATEGORIES, None]
    assert set(REJECTION_CATEGORIES) == {
        "scope_creep",
        "acceptance_gap",
        "weak_test",
        "tests_pass_but_wrong",
        "half_finished",
        "spec_violation",
    }
    assert set(function["parameters"]["required"]) == {
        "verdict",
        "rejection_category",
        "concern",
        "evidence",
        "next_step",
    }


def test_valid_verdicts_parse_and_blank_strings_become_null() -> None:
    verdict, error = parse_verdict([call({**ACCEPT, "rejection_category": "", "next_step": ""})])
    assert error is None and verdict == ACCEPT
    assert parse_verdict([call(REJECT)])[0] == REJECT


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({**ACCEPT, "score": 3}, "unknown field(s): score"),
        ({**ACCEPT, "verdict": "maybe"}, "'verdict' must be"),
        ({**ACCEPT, "concern": ""}, "'concern' must be a non-blank string"),
        ({**ACCEPT, "evidence": "calc.py"}, "'evidence' must be a list of strings"),
        ({**ACCEPT, "rejection_category": "weak_test"}, "accept must have rejection_category null"),
        ({**REJECT, "rejection_category": None}, "a reject needs rejection_category"),
        ({**REJECT, "rejection_category": "vibes"}, "a reject needs rejection_category"),
        ({**REJECT, "next_step": None}, "a reject needs a non-blank next_step"),
    ],
)
def test_invalid_verdicts_are_rejected(payload: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        validate_verdict(payload)
    assert message in str(raised.value)


def test_parse_errors_name_every_problem() -> None:
    verdict, error = parse_verdict([call("{bad"), call({"verdict": "x"})])
    assert verdict is None and error is not None
    assert "not valid JSON" in error and "'verdict' must be" in error
    assert "No `submit_verdict`" in str(parse_verdict([])[1])
    assert "not a tool you have" in str(parse_verdict([call(ACCEPT, name="bash")])[1])


def test_fallback_fails_closed() -> None:
    verdict = fallback_verdict("boom")
    assert verdict["verdict"] == "reject" and verdict["parse_failed"] is True
    assert "boom" in verdict["concern"]
    assert verdict_summary(verdict) == "reject"
    assert verdict_summary(REJECT) == "reject:weak_test"
    assert verdict_summary(ACCEPT) == "accept"


def test_reject_feedback_has_category_concern_evidence_and_next_step() -> None:
    text = format_reject_feedback(REJECT, "code_review")
    for part in ("code_review", "weak_test", "the test is trivial", "- tests/", "cover negatives"):
        assert part in text
    assert "(none provided)" in format_reject_feedback(fallback_verdict("x"), "code_review")


def test_ledger_rendering_never_prints_none() -> None:
    entries = [
        {"stage": "code_review", "turn": 3, "diff_summary": "1 file(s), +2 -0", "verdict": REJECT},
        {"stage": "code_review", "turn": 5, "verdict": ACCEPT},
    ]
    text = format_ledger(entries, "## Prior")
    assert text.startswith("## Prior")
    assert "1. [code_review, turn 3] reject · weak_test" in text
    assert "next step given: cover negatives" in text
    assert "2. [code_review, turn 5] accept" in text
    assert "None" not in text
    assert format_ledger([], "## Prior") == ""
