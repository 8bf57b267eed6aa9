"""Reading a Chat Completions reply (JSON objects as plain dicts) into one ``AssistantTurn``.

A streamed reply is reassembled chunk by chunk. Providers split everything: text, reasoning
(``reasoning`` or ``reasoning_content``), ``reasoning_details`` objects and tool calls, whose
id and name come first and whose arguments arrive in arbitrary pieces keyed by ``index``.
Usage comes in a last chunk with no choices (``stream_options.include_usage``).
``StreamAssembler.add`` takes each chunk and tells ``on_delta`` what arrived; ``turn()``
returns the whole reply. ``turn_from_completion`` reads a reply that came in one piece.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from tilth.model.base import AssistantTurn, Delta, OnDelta, ToolCall, Usage

CHARS_PER_TOKEN = 4
"""The running token estimate while a reply streams (the final count is the endpoint's)."""


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


def _get(obj: Any, key: str) -> Any:
    """``obj[key]`` when ``obj`` is a JSON object holding it, else None."""
    return obj.get(key) if isinstance(obj, dict) else None


def _usage(found: Any) -> Usage:
    return Usage(
        prompt_tokens=_count(_get(found, "prompt_tokens")),
        completion_tokens=_count(_get(found, "completion_tokens")),
    )


def _count(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


class StreamAssembler:
    """Collects chunks; ``chunks`` counts those received (0 means nothing streamed)."""

    def __init__(self, on_delta: OnDelta | None = None) -> None:
        self.on_delta = on_delta
        self.chunks = 0
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._details: list[Any] = []
        self._calls: dict[int, _PartialCall] = {}
        self._usage: Usage | None = None
        self._finish_reason: str | None = None
        self._chars = 0
        self.error: Any = None
        """An ``{"error": ...}`` object a provider sent inside the stream, if any."""

    @property
    def finished(self) -> bool:
        """True once a chunk gave the reply's ``finish_reason``."""
        return self._finish_reason is not None

    @property
    def estimated_tokens(self) -> int:
        return math.ceil(self._chars / CHARS_PER_TOKEN)

    def add(self, chunk: Any) -> bool:
        """Take one ``chat.completion.chunk`` object; True once it brought an error."""
        self.chunks += 1
        usage = _get(chunk, "usage")
        if usage is not None:
            self._usage = _usage(usage)
        if self.error is None and _get(chunk, "error"):
            self.error = _get(chunk, "error")
        choices = _get(chunk, "choices")
        for choice in choices if isinstance(choices, list) else []:
            if _get(choice, "index") not in (0, None):
                continue
            if _get(choice, "finish_reason"):
                self._finish_reason = str(choice["finish_reason"])
            delta = _get(choice, "delta")
            if isinstance(delta, dict):
                self._add_delta(delta)
        return self.error is not None

    def _add_delta(self, delta: dict[str, Any]) -> None:
        for key in ("reasoning", "reasoning_content"):
            piece = delta.get(key)
            if isinstance(piece, str) and piece:
                self._reasoning.append(piece)
                self._tell("reasoning", piece)
                break
        details = delta.get("reasoning_details")
        if isinstance(details, list):
            self._details.extend(details)
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._text.append(content)
            self._tell("text", content)
        calls = delta.get("tool_calls")
        for position, call in enumerate(calls if isinstance(calls, list) else []):
            if isinstance(call, dict):
                self._add_call(call, position)

    def _add_call(self, call: dict[str, Any], position: int) -> None:
        index = call.get("index")
        index = int(index) if isinstance(index, int) else position
        partial = self._calls.setdefault(index, _PartialCall())
        call_id = call.get("id")
        if call_id and not partial.id:
            partial.id = str(call_id)
        function = call.get("function")
        name = _get(function, "name")
        if isinstance(name, str) and name:
            # Most providers send the name once; some repeat it whole in later chunks.
            if partial.name != name:
                started = not partial.name
                partial.name += name
                if started:
                    self._tell("tool_call", partial.name, count=len(name))
        arguments = _get(function, "arguments")
        if isinstance(arguments, str) and arguments:
            partial.arguments.append(arguments)
            self._chars += len(arguments)
            if self.on_delta is not None:
                # A long write_file streams for a while: keep the live count moving.
                self.on_delta(
                    Delta(
                        "tool_call",
                        partial.name,
                        self.estimated_tokens,
                        arguments=True,
                        piece=arguments,
                    )
                )

    def _tell(self, kind: str, text: str, *, count: int | None = None) -> None:
        self._chars += len(text) if count is None else count
        if self.on_delta is not None:
            self.on_delta(Delta(kind, text, self.estimated_tokens))  # type: ignore[arg-type]

    def turn(self, prompt_estimate: int = 0) -> AssistantTurn:
        """The reassembled reply; usage is the endpoint's.

        An endpoint that ignores ``include_usage`` sends none: the counts are then estimated
        (``prompt_estimate``, and the streamed text), so the token cap keeps counting.
        """
        calls = [
            ToolCall(
                id=partial.id or f"call_{number}",
                name=partial.name,
                arguments="".join(partial.arguments),
            )
            for number, (_, partial) in enumerate(sorted(self._calls.items()), start=1)
        ]
        usage = self._usage or Usage(prompt_estimate, self.estimated_tokens)
        text = "".join(self._text)
        reasoning = "".join(self._reasoning)
        return AssistantTurn(
            content=text or None,
            tool_calls=calls,
            usage=usage,
            finish_reason=self._finish_reason,
            reasoning=reasoning or None,
            reasoning_details=merge_details(self._details) or None,
        )


def merge_details(details: list[Any]) -> list[Any]:
    """Streamed ``reasoning_details`` pieces joined back into whole entries.

    Consecutive pieces with the same ``type`` and ``index`` are one entry whose ``text``,
    ``summary`` and ``data`` strings arrived in parts.
    """
    merged: list[Any] = []
    for piece in details:
        if not isinstance(piece, dict):
            merged.append(piece)
            continue
        last = merged[-1] if merged else None
        same = (
            isinstance(last, dict)
            and last.get("type") == piece.get("type")
            and last.get("index") == piece.get("index")
        )
        if not same:
            merged.append(dict(piece))
            continue
        assert isinstance(last, dict)
        for key, value in piece.items():
            if key in ("text", "summary", "data") and isinstance(value, str):
                last[key] = str(last.get(key) or "") + value
            elif value is not None and last.get(key) is None:
                last[key] = value
    return merged


def turn_from_completion(completion: dict[str, Any]) -> AssistantTurn:
    """A ``chat.completion`` object (a reply that came in one piece) as an ``AssistantTurn``."""
    counted = _usage(completion.get("usage"))
    choices = completion.get("choices")
    if not isinstance(choices, list) or not choices:
        return AssistantTurn(content=None, usage=counted)
    choice = choices[0]
    message = _get(choice, "message")
    message = message if isinstance(message, dict) else {}
    calls = []
    listed = message.get("tool_calls")
    for index, call in enumerate(listed if isinstance(listed, list) else [], start=1):
        function = _get(call, "function") or _get(call, "custom")
        arguments = _get(function, "arguments")
        if arguments is None:
            arguments = _get(function, "input") or ""
        calls.append(
            ToolCall(
                id=str(_get(call, "id") or f"call_{index}"),
                name=str(_get(function, "name") or ""),
                arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
            )
        )
    content = message.get("content")
    if isinstance(content, list):  # content parts: their text, in order
        content = "".join(str(_get(part, "text") or "") for part in content) or None
    reasoning = message.get("reasoning")
    details = message.get("reasoning_details")
    finish_reason = _get(choice, "finish_reason")
    return AssistantTurn(
        content=content if isinstance(content, str) else None,
        tool_calls=calls,
        usage=counted,
        finish_reason=str(finish_reason) if finish_reason else None,
        reasoning=reasoning if isinstance(reasoning, str) else None,
        reasoning_details=details if isinstance(details, list) and details else None,
    )
