"""The interview's two control tools: ``ask_user`` and the terminal ``write_seed``.

``read_file``, ``glob`` and ``grep`` come from ``tilth.tools`` (confined to the
source repo); these two are answered by the interview engine itself.
"""

from __future__ import annotations

from typing import Any

from tilth.model.base import function_tool

ASK_USER = "ask_user"
WRITE_SEED = "write_seed"

_STRINGS = {"type": "array", "items": {"type": "string"}}

ASK_USER_SCHEMA = function_tool(
    ASK_USER,
    "Ask the user one question and get the answer text back verbatim. For a decision, "
    "give 2-4 short, substantive options (the user can always pick 'Other' and type "
    "their own answer, so never include an 'Other' option yourself). Omit options for "
    "an open question.",
    {
        "question": {"type": "string", "description": "One question, self-contained."},
        "options": {**_STRINGS, "description": "Optional menu of 2-4 short choices."},
    },
    ["question"],
)

WRITE_SEED_SCHEMA = function_tool(
    WRITE_SEED,
    "TERMINAL: write the whole seed in one call and end the interview. prd_entries: "
    "every task, ids T-001, T-002... (3+ digits), verb-first titles, a concrete "
    "description (it becomes the worker's task text) and 2-4 checkable acceptance "
    "criteria, each mapped to an assertion in the task's test file. test_files: "
    "{filename: python source}, filenames test_t<NNN>_<slug>.py (lowercase slug), at "
    "least one per task and none without a task; they are written under tests/ and must "
    "compile. If the call is rejected, fix what the message names and call again.",
    {
        "prd_entries": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "title": {"type": "string"},
                    "description": {"type": "string"},
                    "acceptance_criteria": _STRINGS,
                },
                "required": ["id", "title", "description", "acceptance_criteria"],
            },
        },
        "test_files": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "filename -> file content",
        },
        "tldr": {"type": "string", "description": "A short markdown summary, one bullet per task."},
        "open_questions": {**_STRINGS, "description": "Questions left open (not load-bearing)."},
        "blockers": {**_STRINGS, "description": "Contradictions or risks the user must know."},
        "scope_notes": {"type": "string", "description": "What is deliberately out of scope."},
    },
    ["prd_entries", "test_files", "tldr"],
)

CONTROL_SCHEMAS: list[dict[str, Any]] = [ASK_USER_SCHEMA, WRITE_SEED_SCHEMA]
