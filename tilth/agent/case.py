"""The worker's case: the ``submit_case`` schema, its parser and how the evaluator sees it.

A case is the worker's claim that the task is done: a summary, a map from each
acceptance criterion to the code that addresses it, the work-arounds it took and
what it is unsure about. It is a legibility aid for the reviewer, never proof —
the seed tests and the evaluator decide.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tilth.model.base import ToolCall

CASE_SCHEMA_VERSION = 1
SUBMIT_CASE = "submit_case"
WORK_AROUNDS_CAP = 5

_CASE_KEYS = {"summary", "ac_coverage", "work_arounds", "uncertainties"}
_COVERAGE_KEYS = {"criterion", "addressed_by", "evidence"}
# A pointer names a place in the code: a path, a module.symbol, a test id, a line number.
_POINTER_RE = re.compile(r"/|::|\.[A-Za-z0-9]{1,8}\b|\w\.\w|:\d+")

SUBMIT_CASE_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": SUBMIT_CASE,
        "description": (
            "Present your finished, verified work for review. Call it exactly once, when the "
            "task is complete and this task's acceptance tests pass. Map every acceptance "
            "criterion to the file/symbol that satisfies it, name any work-arounds, and flag "
            "what you are unsure of. The harness runs the acceptance tests first: a case "
            "cannot argue past a failing test."
        ),
        "parameters": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "summary": {"type": "string", "description": "What you built, in a few lines."},
                "ac_coverage": {
                    "type": "array",
                    "description": "One entry per acceptance criterion.",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "criterion": {"type": "string"},
                            "addressed_by": {
                                "type": "string",
                                "description": "Where: a path, path::symbol or module.symbol.",
                            },
                            "evidence": {"type": "string"},
                        },
                        "required": ["criterion", "addressed_by"],
                    },
                },
                "work_arounds": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": f"Shortcuts or deviations (at most {WORK_AROUNDS_CAP}).",
                },
                "uncertainties": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["summary", "ac_coverage"],
        },
    },
}


def arguments_of(call: ToolCall) -> dict[str, Any]:
    """A control call's arguments as an object; ``ValueError`` says what is wrong."""
    try:
        value = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError as exc:
        raise ValueError(f"arguments are not valid JSON ({exc.msg} at char {exc.pos})") from None
    except RecursionError:
        raise ValueError("arguments are nested too deeply to be read") from None
    if not isinstance(value, dict):
        raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value


def _string_list(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"'{field}' must be a list of strings")
    return [item.strip() for item in value if item.strip()]


def _looks_like_pointer(text: str) -> bool:
    return bool(_POINTER_RE.search(text)) or len(text.split()) < 8


def validate_case(raw: dict[str, Any]) -> dict[str, Any]:
    """The normalized case; raises ``ValueError`` with the first problem found."""
    extra = sorted(set(raw) - _CASE_KEYS)
    if extra:
        raise ValueError(f"unknown field(s): {', '.join(extra)}")
    summary = raw.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        raise ValueError("'summary' must be a non-blank string")
    coverage = raw.get("ac_coverage")
    if not isinstance(coverage, list):
        raise ValueError("'ac_coverage' must be a list of {criterion, addressed_by, evidence?}")
    entries: list[dict[str, str]] = []
    for index, item in enumerate(coverage):
        where = f"ac_coverage[{index}]"
        if not isinstance(item, dict):
            raise ValueError(f"{where} must be an object")
        unknown = sorted(set(item) - _COVERAGE_KEYS)
        if unknown:
            raise ValueError(f"{where} has unknown field(s): {', '.join(unknown)}")
        criterion, addressed_by = item.get("criterion"), item.get("addressed_by")
        if not isinstance(criterion, str) or not criterion.strip():
            raise ValueError(f"{where}.criterion must be a non-blank string")
        if not isinstance(addressed_by, str) or not addressed_by.strip():
            raise ValueError(f"{where}.addressed_by must be a non-blank string")
        if not _looks_like_pointer(addressed_by):
            raise ValueError(
                f"{where}.addressed_by should point at code (a path, path::symbol or "
                f"module.symbol), not describe it"
            )
        entry = {"criterion": criterion.strip(), "addressed_by": addressed_by.strip()}
        evidence = item.get("evidence")
        if evidence is not None:
            if not isinstance(evidence, str):
                raise ValueError(f"{where}.evidence must be a string")
            if evidence.strip():
                entry["evidence"] = evidence.strip()
        entries.append(entry)
    work_arounds = _string_list(raw.get("work_arounds"), "work_arounds")
    if len(work_arounds) > WORK_AROUNDS_CAP:
        raise ValueError(
            f"'work_arounds' lists {len(work_arounds)} items; at most {WORK_AROUNDS_CAP} — "
            "more than that means the task is not done"
        )
    return {
        "summary": summary.strip(),
        "ac_coverage": entries,
        "work_arounds": work_arounds,
        "uncertainties": _string_list(raw.get("uncertainties"), "uncertainties"),
    }


def parse_case(calls: list[ToolCall]) -> tuple[dict[str, Any] | None, str | None]:
    """The first valid ``submit_case`` among ``calls``, or the error to send back."""
    errors: list[str] = []
    for call in calls:
        if call.name != SUBMIT_CASE:
            continue
        try:
            return validate_case(arguments_of(call)), None
        except ValueError as exc:
            errors.append(str(exc))
    if not errors:
        return None, (
            "No `submit_case` call in your response. When the task is complete and verified, "
            "call `submit_case` to present it."
        )
    return None, (
        f"Your `submit_case` call could not be accepted: {' | '.join(errors)}. "
        "Call `submit_case` again with a corrected payload."
    )


def format_case(case: dict[str, Any]) -> str:
    """The case as the evaluator reads it: the worker's words fenced, so that nothing in
    them (a ``## Test output`` heading, a ``[harness]`` note) passes for the harness's."""
    return (
        "## Worker's case\n\n(the worker's own words: claims to check, not evidence)\n\n"
        + fence(case_text(case), "text")
    )


def case_text(case: dict[str, Any]) -> str:
    """The case's fields as plain text (empty blocks left out)."""
    lines = [f"Summary: {case.get('summary', '')}"]
    coverage = case.get("ac_coverage") or []
    if coverage:
        lines += ["", "AC coverage (the worker's claim):"]
        for entry in coverage:
            line = f"- {entry.get('criterion')} → {entry.get('addressed_by')}"
            if entry.get("evidence"):
                line += f" [evidence: {entry['evidence']}]"
            lines.append(line)
    if case.get("work_arounds"):
        lines += ["", "Work-arounds the worker admits (treat them skeptically):"]
        lines += [f"- {item}" for item in case["work_arounds"]]
    if case.get("uncertainties"):
        lines += ["", "Uncertainties the worker flagged:"]
        lines += [f"- {item}" for item in case["uncertainties"]]
    return "\n".join(lines)


def fence(text: str, lang: str = "") -> str:
    """``text`` in a code fence that its own backticks cannot close."""
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"
