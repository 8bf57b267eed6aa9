"""Model calls: the ``Model`` seam, the OpenAI client, the scripted model and the fake server.

``model_for(settings, role)`` is how the rest of Tilth gets a model: calls are routed by role
(worker, evaluator, prep) to that role's endpoint, never by model name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilth.config import Role, Settings
from tilth.model.base import (
    AssistantTurn,
    Delta,
    Model,
    RetryHook,
    ToolCall,
    Usage,
    function_tool,
)
from tilth.model.script import (
    Script,
    delay,
    empty,
    error,
    raw,
    reply,
    stall,
    tool_call,
    tool_call_raw,
    turn_from_reply,
)
from tilth.model.scripted import ScriptedModel

if TYPE_CHECKING:
    from tilth.model.fake_server import FakeServer
    from tilth.model.openai_client import OpenAIModel

# Imported on first use: ``httpx`` takes about a third of a second to import, which commands
# that never call a live model should not pay, and ``python -m tilth.model.fake_server`` must
# not load its own module twice.
_LAZY = {
    "FakeServer": "tilth.model.fake_server",
    "OpenAIModel": "tilth.model.openai_client",
}

__all__ = [
    "AssistantTurn",
    "Delta",
    "FakeServer",
    "Model",
    "OpenAIModel",
    "RetryHook",
    "Script",
    "ScriptedModel",
    "ToolCall",
    "Usage",
    "delay",
    "empty",
    "error",
    "function_tool",
    "model_for",
    "raw",
    "reply",
    "stall",
    "tool_call",
    "tool_call_raw",
    "turn_from_reply",
]


def model_for(
    settings: Settings,
    role: Role,
    *,
    on_retry: RetryHook | None = None,
    on_stream_refused: Callable[[str], None] | None = None,
) -> Model:
    """The model for ``role``, at that role's own endpoint, with the configured retry policy.

    Replies stream; ``on_stream_refused`` hears (once) that the endpoint refused streaming.
    """
    from tilth.model.openai_client import OpenAIModel

    return OpenAIModel(
        settings.endpoint(role),
        max_retries=settings.model_max_retries,
        backoff_seconds=settings.model_backoff_seconds,
        timeout_seconds=settings.model_timeout_seconds,
        on_retry=on_retry,
        on_stream_refused=on_stream_refused,
        max_reply_tokens=settings.max_reply_tokens,
        context_tokens=settings.context_tokens,
    )


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
