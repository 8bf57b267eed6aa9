"""The ``Model`` seam: messages and tools in, one assistant turn out.

Messages and tool schemas use the OpenAI Chat Completions shapes (plain dicts),
since every supported endpoint speaks them. Implementations: ``OpenAIModel``
(any OpenAI-compatible endpoint) and ``ScriptedModel`` (replays a script, used
by tests, the demo and the fake server).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for; ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str

    def parse_arguments(self) -> dict[str, Any]:
        """The arguments as an object; raises ``ValueError`` with a model-readable reason."""
        try:
            value = json.loads(self.arguments) if self.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            reason = f"arguments are not valid JSON ({exc.msg} at char {exc.pos})"
            raise ValueError(reason) from None
        except RecursionError:
            raise ValueError("arguments are nested too deeply to be read") from None
        if not isinstance(value, dict):
            raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
        return value


@dataclass(frozen=True)
class Usage:
    """Token counts reported for one call."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class AssistantTurn:
    """What one model call returned."""

    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    reasoning: str | None = None
    reasoning_details: list[Any] | None = None

    @property
    def is_empty(self) -> bool:
        """No tool calls, no text and no reasoning: the provider gave nothing usable."""
        return (
            not self.tool_calls
            and not (self.content or "").strip()
            and not self.reasoning_details
            and not (self.reasoning or "").strip()
        )

    def history_message(self) -> dict[str, Any]:
        """The message to append to the thread (reasoning echoed back for thinking models)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content or ""}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        if self.reasoning:
            message["reasoning"] = self.reasoning
        if self.reasoning_details:
            message["reasoning_details"] = self.reasoning_details
        return message


@dataclass(frozen=True)
class Delta:
    """A piece of a reply as it arrives: streamed text, reasoning, or a tool call's name.

    ``completion_tokens`` is the running count for the reply so far (estimated from the
    text when the endpoint reports none until the end), so a progress line can show it.
    A ``tool_call`` delta carries the call's name; a streaming model may repeat it while
    the call's arguments arrive (``arguments`` is then true), so the count stays live.
    """

    kind: Literal["text", "reasoning", "tool_call"]
    text: str
    completion_tokens: int = 0
    arguments: bool = False
    """``tool_call`` only: more of the call's arguments arrived (the name was told before)."""
    piece: str = ""
    """``tool_call`` with ``arguments``: the piece of argument text that arrived."""


OnDelta = Callable[[Delta], None]
RetryHook = Callable[[int, str, float], None]
"""``(attempt, reason, delay)``: told before each retry of a failed call."""


class Model(Protocol):
    """Anything that can answer a chat-completions request."""

    @property
    def name(self) -> str:
        """The model name shown in logs and events."""
        ...

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        on_delta: OnDelta | None = None,
        on_retry: RetryHook | None = None,
    ) -> AssistantTurn:
        """Send the thread and tool schemas; return the assistant's turn.

        ``on_delta``, when given, is called with each piece of the reply as it arrives
        (a model that cannot stream may call it once, or never); the returned turn is
        always the whole reply. ``on_retry`` is told before each retry of a failed call.
        Raises ``tilth.errors.ModelError`` when no answer could be had
        (``ContextOverflow`` when the request is longer than the model's context window).
        """
        ...


def function_tool(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    """Build an OpenAI ``tools`` entry."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
            },
        },
    }
