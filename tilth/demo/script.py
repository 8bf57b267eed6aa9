"""A scripted team: one ``Script`` function that plays interviewer, worker and evaluator.

It is driven only by the request (model name, tools offered, message contents),
never by a call counter, so a story replays identically after a reset, a rewind
or a restart. Used by ``tilth demo`` and by the run-loop tests. Every model name
it answers starts with ``scripted`` so nothing can pass it off as a real model.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from tilth.model.script import Reply, empty, reply, tool_call

WORKER = "scripted-worker"
EVALUATOR = "scripted-evaluator"
INTERVIEWER = "scripted-interviewer"

REJECTION_MARK = "rejected this work"
_TASK_IN_BRIEF = re.compile(r"\*\*ID:\*\*\s*(T-\d{3,})")
_TASK_UNDER_REVIEW = re.compile(r"# Task to evaluate:\s*(T-\d{3,})")
_ATTEMPT_IN_BRIEF = re.compile(r"You are attempt (\d+) of \d+")


@dataclass
class Recipe:
    """How the scripted worker builds one task, and how the evaluator judges it."""

    files: dict[str, str]
    """Written in the first implementing turn."""
    fixed: dict[str, str] = field(default_factory=dict)
    """Written instead once a reviewer has rejected the work."""
    accept_when: str | None = None
    """The code review rejects until this text appears in the diff (one rejection cycle)."""
    concern: str = "an acceptance criterion is not met yet"
    next_step: str = "handle the case the acceptance criteria name"
    probes: list[dict[str, Any]] = field(default_factory=list)
    """Extra tool calls made alongside the first write (to exercise tools, e.g. escapes)."""
    mode: str = "normal"
    """``normal``; ``stall`` (never submits), ``empty`` (empty replies), ``quiet`` (prose only)."""
    always_reject: bool = False
    test_command: str = "python -m pytest -q tests"
    attempts: dict[int, dict[str, str]] = field(default_factory=dict)
    """Written instead of ``files`` by attempt number N of a best-of-N run (1-based)."""


@dataclass
class Interview:
    """What the scripted interviewer asks once, then the seed it writes."""

    question: str
    options: list[str]
    prd_entries: list[dict[str, Any]]
    test_files: dict[str, str]
    tldr: str


@dataclass
class Team:
    """``Script(Team(...))``: answers each request from its content."""

    recipes: dict[str, Recipe]
    interview: Interview | None = None

    def __call__(self, model: str, request: dict[str, Any]) -> Reply:
        tools = {t.get("function", {}).get("name") for t in request.get("tools") or []}
        messages: list[dict[str, Any]] = request.get("messages") or []
        if "write_seed" in tools:
            return self._interviewer(messages)
        if "submit_verdict" in tools:
            return self._evaluator(messages)
        return self._worker(tools, messages)

    # ---- interviewer ------------------------------------------------------------------
    def _interviewer(self, messages: list[dict[str, Any]]) -> Reply:
        if self.interview is None:
            return reply("(scripted) there is no interview in this script")
        asked = any(m.get("role") == "tool" for m in messages)
        iv = self.interview
        if not asked:
            return reply(None, tool_call("ask_user", question=iv.question, options=iv.options))
        return reply(
            "(scripted) writing the seed",
            tool_call(
                "write_seed",
                prd_entries=iv.prd_entries,
                test_files=iv.test_files,
                tldr=iv.tldr,
                open_questions=[],
                scope_notes="Scripted demo seed.",
            ),
        )

    # ---- worker -----------------------------------------------------------------------
    def _worker(self, tools: set[Any], messages: list[dict[str, Any]]) -> Reply:
        task_id = _find(_TASK_IN_BRIEF, messages)
        recipe = self.recipes.get(task_id or "")
        if recipe is None:
            return reply("(scripted) I do not know this task.")
        if recipe.mode == "empty":
            return empty()
        if recipe.mode == "quiet":
            return reply("(scripted) Thinking about it; nothing to call yet.")
        if "submit_brainstorm" in tools:
            note = f"(scripted) Design note for {task_id}: write the files the tests import."
            return reply(None, tool_call("submit_brainstorm", content=note))
        if "submit_plan" in tools:
            steps = "\n".join(f"{n}. write {path}" for n, path in enumerate(recipe.files, 1))
            plan = f"(scripted) Plan for {task_id}:\n{steps}\n{len(recipe.files) + 1}. run tests"
            return reply(None, tool_call("submit_plan", plan=plan))
        if "submit_case" not in tools:
            return reply(None, tool_call("bash", command="true"))
        if recipe.mode == "stall":
            return reply(None, tool_call("bash", command="echo still working"))
        rejected = any(REJECTION_MARK in _text(m) for m in messages)
        files = {**recipe.files, **recipe.fixed} if rejected and recipe.fixed else recipe.files
        attempt = _find(_ATTEMPT_IN_BRIEF, messages)
        if attempt is not None and int(attempt) in recipe.attempts:
            files = recipe.attempts[int(attempt)]
        written = _last_write(messages, files)
        if written is None:
            calls = [tool_call("write_file", path=p, content=c) for p, c in files.items()]
            if not rejected:
                calls += recipe.probes
            return reply(f"(scripted) Writing {', '.join(files)}.", *calls)
        if not _ran_after(messages, written, recipe.test_command):
            return reply(None, tool_call("bash", command=recipe.test_command))
        coverage = [{"criterion": "the acceptance tests pass", "addressed_by": next(iter(files))}]
        summary = f"(scripted) {task_id}: wrote {', '.join(files)}"
        return reply(None, tool_call("submit_case", summary=summary, ac_coverage=coverage))

    # ---- evaluator --------------------------------------------------------------------
    def _evaluator(self, messages: list[dict[str, Any]]) -> Reply:
        task_id = _find(_TASK_UNDER_REVIEW, messages)
        recipe = self.recipes.get(task_id or "")
        review = "\n".join(_text(m) for m in messages)
        code_review = "## Review: code_review" in review
        if recipe is not None and code_review:
            missing = recipe.accept_when is not None and recipe.accept_when not in review
            if recipe.always_reject or missing:
                return _verdict(
                    "reject", recipe.concern, recipe.next_step, category="acceptance_gap"
                )
        return _verdict("accept", f"(scripted) {task_id or 'the work'} meets its criteria", None)


def _verdict(
    verdict: str, concern: str, next_step: str | None, category: str | None = None
) -> Reply:
    return reply(
        None,
        tool_call(
            "submit_verdict",
            verdict=verdict,
            rejection_category=category,
            concern=concern,
            evidence=[],
            next_step=next_step,
        ),
    )


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return json.dumps(content) if content is not None else ""


def _find(pattern: re.Pattern[str], messages: list[dict[str, Any]]) -> str | None:
    for message in messages:
        if message.get("role") in ("user", "system") and (match := pattern.search(_text(message))):
            return match.group(1)
    return None


def _calls(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(name, arguments)`` of an assistant message's tool calls."""
    out = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except (json.JSONDecodeError, RecursionError):
            arguments = {}
        out.append((str(function.get("name")), arguments if isinstance(arguments, dict) else {}))
    return out


def _last_write(messages: list[dict[str, Any]], files: dict[str, str]) -> int | None:
    """Index of the message that last wrote ``files`` exactly as wanted (None: not yet)."""
    pending = dict(files)
    found = None
    for index, message in enumerate(messages):
        for name, arguments in _calls(message):
            path = arguments.get("path")
            if name == "write_file" and path in files and arguments.get("content") == files[path]:
                pending.pop(path, None)
                found = index
    return found if not pending else None


def _ran_after(messages: list[dict[str, Any]], index: int, command: str) -> bool:
    """True when ``command`` was run with ``bash`` after message ``index``."""
    return any(
        name == "bash" and arguments.get("command") == command
        for message in messages[index + 1 :]
        for name, arguments in _calls(message)
    )
