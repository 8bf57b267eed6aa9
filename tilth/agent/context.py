"""Keeping an actor's thread within its model's context window, by summarizing the oldest turns.

The prompt's size is tracked from what the server reports (``usage.prompt_tokens`` of the
last reply, scaled by how much the thread grew since); before the first reply it is an
estimate from the text. Before a request would pass ``THRESHOLD`` of the window, and once
after the server refused a request for its size, the oldest part of the thread — after
the system prompt and the first brief — is replaced by a summary: the same summarize as
``tilth summarize`` (its replaced messages kept, so going back still works), recorded
after a checkpoint of its own when the actor has a recorder, so it can be undone by a
rewind to that checkpoint.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilth.errors import ContextOverflow, ModelError
from tilth.model.endpoint_facts import DEFAULT_CONTEXT_TOKENS
from tilth.session.threads import StoredMessage
from tilth.timeline.rewind.summarize import summarize_span

if TYPE_CHECKING:
    from tilth.agent.turn import Actor
    from tilth.config import Settings
    from tilth.model.base import Model

THRESHOLD = 0.9
FIRST_GUESS_CHARS_PER_TOKEN = 3
"""Before any reply says how long a prompt is: code and JSON run about 3 characters a token."""
MAX_COMPACTIONS_PER_REQUEST = 3
Checkpointer = Callable[[str], str | None]
"""Records a checkpoint labelled with the text; returns its id (None: nothing recorded)."""


def window_for(model: Model, settings: Settings) -> int:
    """The context window of ``model``: its endpoint's, else the setting, else 32768.

    A model that knows its window has ``context_window() -> int | None`` (``OpenAIModel``
    asks its endpoint); the ``Model`` seam does not require it.
    """
    asked = getattr(model, "context_window", None)
    found = asked() if callable(asked) else None
    if isinstance(found, int) and found > 0:
        return found
    return settings.context_tokens or DEFAULT_CONTEXT_TOKENS


def _chars(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    return len(json.dumps(messages, ensure_ascii=False)) + len(json.dumps(tools))


class ContextKeeper:
    """One actor's view of its prompt size, and the summarizing that keeps it in the window."""

    def __init__(self, window: int, checkpoint: Checkpointer | None = None) -> None:
        self.window = window
        self.checkpoint = checkpoint
        self._measured: tuple[int, int] | None = None
        """(prompt tokens the server counted, characters sent) of the last request."""

    @classmethod
    def for_actor(
        cls, model: Model, settings: Settings, checkpoint: Checkpointer | None = None
    ) -> ContextKeeper:
        return cls(window_for(model, settings), checkpoint)

    @property
    def limit(self) -> int:
        return int(self.window * THRESHOLD)

    def estimate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        """The prompt tokens a request of ``messages`` and ``tools`` will count."""
        chars = _chars(messages, tools)
        if self._measured is not None:
            tokens, sent = self._measured
            return math.ceil(tokens * chars / max(1, sent))
        return math.ceil(chars / FIRST_GUESS_CHARS_PER_TOKEN)

    def observe(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], prompt_tokens: int
    ) -> None:
        """Remember what the server counted for the request just answered."""
        if prompt_tokens > 0:
            self._measured = (prompt_tokens, _chars(messages, tools))

    def before_request(self, actor: Actor, tools: list[dict[str, Any]]) -> None:
        """Summarize the oldest turns while the next request would pass the threshold."""
        for _ in range(MAX_COMPACTIONS_PER_REQUEST):
            estimate = self.estimate(actor.thread.messages(), tools)
            if estimate < self.limit:
                return
            why = (
                f"the conversation is about {estimate:,} tokens, near the model's context "
                f"window of {self.window:,}"
            )
            if not self.compact(actor, why, estimate=estimate):
                return

    def after_overflow(self, actor: Actor, overflow: ContextOverflow) -> bool:
        """After the server refused a request for its size: summarize once (True: retry)."""
        if overflow.window:
            self.window = overflow.window
        if overflow.prompt_tokens:
            self._measured = (overflow.prompt_tokens, _chars(actor.thread.messages(), []))
        said = f" ({overflow.prompt_tokens:,} tokens)" if overflow.prompt_tokens else ""
        why = f"the server refused the request as longer than its context window{said}"
        return self.compact(actor, why, estimate=overflow.prompt_tokens)

    def compact(self, actor: Actor, why: str, *, estimate: int | None = None) -> bool:
        """Summarize the oldest part of ``actor``'s thread; False when nothing could be."""
        parts = oldest_part(actor.thread.read())
        if parts is None:
            actor.session.log("context_full", **actor.scope(), reason=why, window=self.window)
            return False
        label = f"before summarizing {len(parts[1])} older message(s): context nearly full"
        checkpoint = self.checkpoint(label) if self.checkpoint is not None else None

        def on_retry(attempt: int, reason: str, delay: float) -> None:
            actor.session.log(
                "model_retry",
                **{**actor.scope(), "actor": "summarizer"},
                role="summarizer",
                attempt=attempt,
                reason=reason,
                delay=round(delay, 2),
            )
            actor.notice("retry", f"summarizer model call failed ({reason}); retry {attempt}")

        try:
            result = summarize_span(
                actor.session,
                actor.thread,
                parts,
                "up-to",
                actor.model,
                checkpoint,
                max_chars=self.window * FIRST_GUESS_CHARS_PER_TOKEN // 2,
                on_retry=on_retry,
                actor=actor.name,
                reason=why,
                automatic=True,
            )
        except ModelError as exc:
            actor.session.log("context_full", **actor.scope(), reason=why, error=exc.message)
            return False
        actor.session.log(
            "context_compacted",
            **actor.scope(),
            reason=why,
            window=self.window,
            estimate=estimate,
            replaced=len(result.replaced),
            checkpoint=checkpoint,
        )
        where = f"; rewind to {checkpoint} to undo" if checkpoint else ""
        actor.notice(
            "compacted",
            f"{why}: the oldest {len(result.replaced)} message(s) were summarized{where}",
        )
        return True


def oldest_part(
    stored: list[StoredMessage],
) -> tuple[list[StoredMessage], list[StoredMessage], list[StoredMessage]] | None:
    """``(kept head, the oldest half to summarize, the rest)``, or None when too short.

    The head is the system prompt and the first brief; the cut never separates a tool
    call from its answers, and the newest exchange is always kept.
    """
    start = 0
    while start < len(stored) and stored[start].message.get("role") == "system":
        start += 1
    if start < len(stored) and stored[start].message.get("role") == "user":
        start += 1
    rest = stored[start:]
    if len(rest) < 3:
        return None
    sizes = [len(json.dumps(m.message, ensure_ascii=False)) for m in rest]
    half, total, cut = sum(sizes) / 2, 0, 0
    while cut < len(rest) - 1 and total < half:
        total += sizes[cut]
        cut += 1
    while cut < len(rest) and rest[cut].message.get("role") == "tool":
        cut += 1
    if cut >= len(rest):
        # Everything after the head is one exchange: summarize all but its newest answers.
        cut = len(rest) - 1
        while cut > 0 and rest[cut].message.get("role") == "tool":
            cut -= 1
    if cut <= 0:
        return None
    return stored[:start], rest[:cut], rest[cut:]
