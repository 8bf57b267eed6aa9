"""The evaluator's verdict: the ``submit_verdict`` schema, its parser, and how it is shown.

A verdict that cannot be parsed after one retry becomes a rejection marked
``parse_failed`` — the pipeline fails closed, never open.
"""

from __future__ import annotations

from typing import Any

from tilth.agent.case import arguments_of
from tilth.model.base import ToolCall

VERDICT_SCHEMA_VERSION = 1
SUBMIT_VERDICT = "submit_verdict"
REJECTION_CATEGORIES = (
    "scope_creep",
    "acceptance_gap",
    "weak_test",
    "tests_pass_but_wrong",
    "half_finished",
    "spec_violation",
)
REVIEWED_STAGE = {"design_review": "brainstorming", "code_review": "implementing"}
"""The stage whose work each review judges (and where a rejection sends the task)."""
_VERDICT_KEYS = {"verdict", "rejection_category", "concern", "evidence", "next_step"}

SUBMIT_VERDICT_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": SUBMIT_VERDICT,
        "description": (
            "Record your verdict on the work under review. Call it exactly once. A rejection "
            "needs a category and a concrete next step the worker can act on."
        ),
        "parameters": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "verdict": {"type": "string", "enum": ["accept", "reject"]},
                "rejection_category": {
                    "type": ["string", "null"],
                    "enum": [*REJECTION_CATEGORIES, None],
                    "description": "Required when rejecting; null when accepting.",
                },
                "concern": {"type": "string", "description": "The main finding, one paragraph."},
                "evidence": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Pointers: path:line, test names, diff hunks.",
                },
                "next_step": {
                    "type": ["string", "null"],
                    "description": "Required when rejecting: what the worker must do next.",
                },
            },
            "required": ["verdict", "rejection_category", "concern", "evidence", "next_step"],
        },
    },
}


def validate_verdict(raw: dict[str, Any]) -> dict[str, Any]:
    """The normalized verdict; raises ``ValueError`` with the first problem found."""
    extra = sorted(set(raw) - _VERDICT_KEYS)
    if extra:
        raise ValueError(f"unknown field(s): {', '.join(extra)}")
    verdict = raw.get("verdict")
    if verdict not in ("accept", "reject"):
        raise ValueError(f'\'verdict\' must be "accept" or "reject", got {verdict!r}')
    # Providers often send "" where the schema says null.
    category = raw.get("rejection_category") or None
    next_step = raw.get("next_step") or None
    concern = raw.get("concern")
    if not isinstance(concern, str) or not concern.strip():
        raise ValueError("'concern' must be a non-blank string")
    evidence = raw.get("evidence")
    if evidence is None:
        evidence = []
    if not isinstance(evidence, list) or not all(isinstance(item, str) for item in evidence):
        raise ValueError("'evidence' must be a list of strings")
    if next_step is not None and not isinstance(next_step, str):
        raise ValueError("'next_step' must be a string or null")
    if verdict == "accept" and category is not None:
        raise ValueError("an accept must have rejection_category null")
    if verdict == "reject":
        if category not in REJECTION_CATEGORIES:
            raise ValueError(
                f"a reject needs rejection_category, one of {', '.join(REJECTION_CATEGORIES)}"
            )
        if not next_step or not next_step.strip():
            raise ValueError("a reject needs a non-blank next_step")
    return {
        "verdict": verdict,
        "rejection_category": category,
        "concern": concern.strip(),
        "evidence": [item.strip() for item in evidence if item.strip()],
        "next_step": next_step.strip() if next_step else None,
    }


def parse_verdict(calls: list[ToolCall]) -> tuple[dict[str, Any] | None, str | None]:
    """The first valid ``submit_verdict`` among ``calls``, or the error to send back."""
    errors: list[str] = []
    for call in calls:
        if call.name != SUBMIT_VERDICT:
            errors.append(f"`{call.name}` is not a tool you have")
            continue
        try:
            return validate_verdict(arguments_of(call)), None
        except ValueError as exc:
            errors.append(str(exc))
    if not calls:
        return None, (
            "No `submit_verdict` call in your response. Respond with exactly one "
            "`submit_verdict` call."
        )
    return None, (
        f"Your `submit_verdict` call could not be parsed: {' | '.join(errors)}. "
        "Call `submit_verdict` again with a valid payload."
    )


def fallback_verdict(error: str) -> dict[str, Any]:
    """The rejection recorded when the evaluator could not be parsed twice (fail closed)."""
    return {
        "verdict": "reject",
        "rejection_category": None,
        "concern": f"The reviewer's answer could not be parsed after a retry. Last error: {error}",
        "evidence": [],
        "next_step": None,
        "parse_failed": True,
    }


def verdict_summary(verdict: dict[str, Any]) -> str:
    """``accept``, ``reject`` or ``reject:<category>``."""
    category = verdict.get("rejection_category")
    if verdict.get("verdict") == "reject" and category:
        return f"reject:{category}"
    return str(verdict.get("verdict"))


CONCERN_CHARS = 140
"""How much of a rejection's concern a progress line shows."""


def shorten(text: str, limit: int) -> str:
    """``text`` on one line (whitespace runs made one space), cut at a word to ``limit``."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "…"


def rejection_line(verdict: dict[str, Any], limit: int = CONCERN_CHARS) -> str:
    """A rejection for a progress line: ``weak_test — <the concern, on one line, shortened>``.

    The concern is model text: a terminal sink neutralises its control sequences.
    """
    category = verdict.get("rejection_category") or (
        "unparseable verdict" if verdict.get("parse_failed") else "no category"
    )
    concern = shorten(str(verdict.get("concern") or ""), limit)
    return f"{category} — {concern}" if concern else str(category)


def format_reject_feedback(verdict: dict[str, Any], stage: str) -> str:
    """What the worker reads when a review sent its work back."""
    lines = [
        f"An independent reviewer rejected this work at {stage}.",
        f"Rejection category: {verdict.get('rejection_category') or '(unspecified)'}",
        f"Concern: {verdict.get('concern', '')}",
    ]
    evidence = verdict.get("evidence") or []
    if evidence:
        lines.append("Evidence:")
        lines += [f"- {item}" for item in evidence]
    lines.append(f"Next step: {verdict.get('next_step') or '(none provided)'}")
    lines += [
        "",
        "Apply the next step, check the result yourself, then submit again. Address the concern "
        "directly; do not argue with it.",
    ]
    return "\n".join(lines)


def format_ledger(entries: list[dict[str, Any]], header: str) -> str:
    """Prior verdicts on a task, oldest first ("" when there are none)."""
    if not entries:
        return ""
    lines = [header, ""]
    for number, entry in enumerate(entries, start=1):
        verdict = entry.get("verdict") or {}
        head = f"{number}. [{entry.get('stage', '?')}, turn {entry.get('turn', '?')}] "
        head += str(verdict.get("verdict", "?"))
        if verdict.get("rejection_category"):
            head += f" · {verdict['rejection_category']}"
        if verdict.get("parse_failed"):
            head += " · (reviewer answer unparseable)"
        lines.append(head)
        if verdict.get("concern"):
            lines.append(f"   concern: {verdict['concern']}")
        if verdict.get("next_step"):
            lines.append(f"   next step given: {verdict['next_step']}")
        if entry.get("diff_summary"):
            lines.append(f"   diff at that point: {entry['diff_summary']}")
    return "\n".join(lines)
