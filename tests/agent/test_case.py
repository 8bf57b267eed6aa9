"""The worker's case: schema, validation and how the evaluator reads it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tilth.agent.case import (
    SUBMIT_CASE_SCHEMA,
    WORK_AROUNDS_CAP,
    format_case,
    parse_case,
    validate_case,
)
from tilth.model.base import ToolCall

GOOD = {
    "summary": "Added calc.add",
    "ac_coverage": [{"criterion": "add(2, 3) == 5", "addressed_by": "calc.py::add"}],
}


def call(arguments: Any, name: str = "submit_case") -> ToolCall:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall("c1", name, text)


def test_schema_names_the_required_fields() -> None:
    function = SUBMIT_CASE_SCHEMA["function"]
    assert function["name"] == "submit_case"
    params = function["parameters"]
    assert params["required"] == ["summary", "ac_coverage"]
    assert set(params["properties"]) == {"summary", "ac_coverage", "work_arounds", "uncertainties"}
    assert params["properties"]["ac_coverage"]["items"]["required"] == ["criterion", "addressed_by"]


def test_a_valid_case_is_normalized() -> None:
    case, error = parse_case([call({**GOOD, "work_arounds": None, "uncertainties": ["", " x "]})])
    assert error is None
    assert case == {**GOOD, "work_arounds": [], "uncertainties": ["x"]}


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({**GOOD, "extra": 1}, "unknown field(s): extra"),
        ({**GOOD, "summary": "  "}, "'summary' must be a non-blank string"),
        ({"summary": "x"}, "'ac_coverage' must be a list"),
        ({**GOOD, "ac_coverage": ["x"]}, "ac_coverage[0] must be an object"),
        ({**GOOD, "ac_coverage": [{"criterion": "a"}]}, "addressed_by must be a non-blank"),
        (
            {**GOOD, "ac_coverage": [{"criterion": "a", "addressed_by": "x", "why": "y"}]},
            "unknown field(s): why",
        ),
        (
            {
                **GOOD,
                "ac_coverage": [
                    {
                        "criterion": "a",
                        "addressed_by": "the function that I wrote which adds the two numbers",
                    }
                ],
            },
            "should point at code",
        ),
        ({**GOOD, "uncertainties": "one"}, "'uncertainties' must be a list of strings"),
        ({**GOOD, "work_arounds": ["w"] * (WORK_AROUNDS_CAP + 1)}, "at most"),
    ],
)
def test_invalid_cases_say_what_to_fix(payload: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=None) as raised:
        validate_case(payload)
    assert message in str(raised.value)


def test_unparseable_and_non_object_arguments_are_errors_not_crashes() -> None:
    for raw in ("{nope", "[1, 2]", '"text"'):
        case, error = parse_case([call(raw)])
        assert case is None
        assert error is not None and "could not be accepted" in error


def test_first_valid_call_wins_and_missing_call_is_explained() -> None:
    case, _ = parse_case([call({"summary": ""}), call({**GOOD, "summary": "second"})])
    assert case is not None and case["summary"] == "second"
    assert parse_case([call(GOOD, name="bash")])[1] is not None
    assert "No `submit_case`" in str(parse_case([])[1])


def test_format_case_shows_claims_and_leaves_empty_blocks_out() -> None:
    text = format_case(
        {
            **GOOD,
            "ac_coverage": [{**GOOD["ac_coverage"][0], "evidence": "test passes"}],
            "work_arounds": ["hard-coded"],
            "uncertainties": [],
        }
    )
    assert "## Worker's case" in text
    assert "- add(2, 3) == 5 → calc.py::add [evidence: test passes]" in text
    assert "hard-coded" in text and "skeptically" in text
    assert "Uncertainties" not in text
