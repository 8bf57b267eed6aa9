"""A ``Model`` that replays a ``Script`` in-process: no HTTP, no network, labelled as scripted."""

from __future__ import annotations

import copy
import re
import threading
import time
from typing import Any

from tilth.errors import ModelError
from tilth.model.base import AssistantTurn, Delta, OnDelta, RetryHook
from tilth.model.script import WAITS, Script, turn_from_reply


class ScriptedModel:
    """Answers each call with the script's next reply for ``name``."""

    def __init__(self, script: Script, name: str = "scripted") -> None:
        self.script = script
        self.script_key = name
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []

    @property
    def name(self) -> str:
        """Always says "scripted", so no log or page can pass it off as a real model."""
        if "scripted" in self.script_key.lower():
            return self.script_key
        return f"scripted:{self.script_key}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request so far, as ``{"model", "messages", "tools"}`` copies."""
        with self._lock:
            return list(self._requests)

    def context_window(self) -> int | None:
        """A scripted model has no window of its own (``TILTH_CONTEXT_TOKENS`` applies)."""
        return None

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        on_delta: OnDelta | None = None,
        on_retry: RetryHook | None = None,
    ) -> AssistantTurn:
        """The next scripted turn; error (and raw HTTP) replies raise ``ModelError``."""
        # Copies, because callers keep appending to their message lists.
        request = {
            "model": self.script_key,
            "messages": copy.deepcopy(messages),
            "tools": copy.deepcopy(tools),
        }
        with self._lock:
            self._requests.append(request)
        reply = self.script.next(self.script_key, request)
        while reply["type"] in WAITS:
            time.sleep(reply["seconds"])
            reply = reply["then"]
        if reply["type"] == "error":
            raise ModelError(
                f"the scripted model {self.name} failed: HTTP {reply['status']}: {reply['message']}"
            )
        turn = turn_from_reply(reply)
        if on_delta is not None:
            stream_turn(turn, on_delta)
        return turn


def stream_turn(turn: AssistantTurn, on_delta: OnDelta) -> None:
    """Hand ``turn`` to ``on_delta`` piece by piece, as a streaming endpoint would."""
    count = 0
    for kind, text in (("reasoning", turn.reasoning or ""), ("text", turn.content or "")):
        for piece in re.findall(r"\S*\s*", text):
            if piece:
                count += 1
                on_delta(Delta(kind, piece, count))  # type: ignore[arg-type]
    for call in turn.tool_calls:
        on_delta(Delta("tool_call", call.name, count))
