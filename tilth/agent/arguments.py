"""Tool-call arguments as a thread may keep them: valid JSON objects, or an answered error.

A model may send arguments that are not JSON (cut off at the reply-length limit, or just
malformed) or JSON that is not an object. llama.cpp's chat templates iterate over every
call's arguments as an object, so a history holding anything else makes the server
refuse every later request (HTTP 500): the thread keeps ``{}`` instead, and the turn
answers such a call with the reason it was not run.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from tilth.model.base import AssistantTurn, ToolCall


def valid_history(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with every tool call's arguments valid JSON (an older thread may hold
    invalid ones, which llama.cpp refuses with HTTP 500 on every request)."""
    fixed: list[dict[str, Any]] = []
    for message in messages:
        calls = message.get("tool_calls")
        if message.get("role") == "assistant" and isinstance(calls, list):
            repaired = [_valid_call(call) for call in calls]
            if repaired != calls:
                message = {**message, "tool_calls": repaired}
        fixed.append(message)
    return fixed


def _valid_call(call: Any) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return call
    text = function.get("arguments")
    if isinstance(text, str) and not _is_object(text):
        return {**call, "function": {**function, "arguments": "{}"}}
    return call


def unreadable_calls(calls: list[ToolCall]) -> dict[str, str]:
    """Call id → why its arguments are not JSON, for each such call (valid JSON that is not
    an object is the tool's to refuse)."""
    found = {}
    for call in calls:
        if not _is_json(call.arguments):
            try:
                call.parse_arguments()
            except ValueError as exc:
                found[call.id] = str(exc)
    return found


def _is_json(text: str) -> bool:
    try:
        json.loads(text) if text.strip() else None
    except (
        json.JSONDecodeError,
        RecursionError,
    ):  # nesting past the parser's depth is unreadable too
        return False
    return True


def _is_object(text: str) -> bool:
    """``text`` is a JSON object (what chat templates iterate over; blank is not JSON)."""
    try:
        return isinstance(json.loads(text), dict)
    except (json.JSONDecodeError, RecursionError):
        return False


def with_valid_arguments(turn: AssistantTurn) -> AssistantTurn:
    """The turn as the thread keeps it: arguments that are not a JSON object become ``{}``
    (llama.cpp's chat templates iterate over them as an object; anything else makes the
    server refuse every later request)."""
    if all(_is_object(call.arguments) for call in turn.tool_calls):
        return turn
    calls = [
        call if _is_object(call.arguments) else replace(call, arguments="{}")
        for call in turn.tool_calls
    ]
    return replace(turn, tool_calls=calls)
