"""Reassembling a streamed Chat Completions reply, chunk by chunk, into one ``AssistantTurn``.

Providers split everything: text, reasoning (``reasoning`` or ``reasoning_content``),
``reasoning_details`` objects and tool calls, whose id and name come first and whose
arguments arrive in arbitrary pieces keyed by ``index``. Usage comes in a last chunk with
no choices (``stream_options.include_usage``). ``StreamAssembler.add`` takes each SDK chunk
and tells ``on_delta`` what arrived; ``turn()`` returns the whole reply.
"""

from __future__ import annotations

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


def _extra(obj: Any, key: str) -> Any:
    """A field the SDK's models do not declare (``reasoning``...), or a declared one."""
    extras = getattr(obj, "model_extra", None) or {}
    return extras.get(key, getattr(obj, key, None))


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
    def estimated_tokens(self) -> int:
        return math.ceil(self._chars / CHARS_PER_TOKEN)

    def add(self, chunk: Any) -> None:
        """Take one ``ChatCompletionChunk`` (or anything shaped like one)."""
        self.chunks += 1
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self._usage = Usage(
                prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            )
        if self.error is None:
            self.error = _extra(chunk, "error")
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0) not in (0, None):
                continue
            if getattr(choice, "finish_reason", None):
                self._finish_reason = str(choice.finish_reason)
            delta = getattr(choice, "delta", None)
            if delta is not None:
                self._add_delta(delta)

    def _add_delta(self, delta: Any) -> None:
        for key in ("reasoning", "reasoning_content"):
            piece = _extra(delta, key)
            if isinstance(piece, str) and piece:
                self._reasoning.append(piece)
                self._tell("reasoning", piece)
                break
        details = _extra(delta, "reasoning_details")
        if isinstance(details, list):
            self._details.extend(details)
        content = getattr(delta, "content", None)
        if isinstance(content, str) and content:
            self._text.append(content)
            self._tell("text", content)
        for position, call in enumerate(getattr(delta, "tool_calls", None) or []):
            self._add_call(call, position)

    def _add_call(self, call: Any, position: int) -> None:
        index = getattr(call, "index", None)
        index = int(index) if isinstance(index, int) else position
        partial = self._calls.setdefault(index, _PartialCall())
        call_id = getattr(call, "id", None)
        if call_id and not partial.id:
            partial.id = str(call_id)
        function = getattr(call, "function", None)
        name = getattr(function, "name", None) if function is not None else None
        if name:
            # Most providers send the name once; some repeat it whole in later chunks.
            if partial.name != name:
                started = not partial.name
                partial.name += name
                if started:
                    self._tell("tool_call", partial.name, count=len(name))
        arguments = getattr(function, "arguments", None) if function is not None else None
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
