"""Keeping an actor's thread within its model's context window, by summarizing the oldest turns.

The prompt's size is tracked from what the server reports (``usage.prompt_tokens`` of the
last reply, scaled by how much the thread grew since); before the first reply it is an
estimate from the text. Before a request would pass ``THRESHOLD`` of the window, and once
after the server refused a request for its size, the oldest part of the thread — after
the system prompt and the first brief — is replaced by a summary: the same summarize as
``tilth summarize`` (its replaced messages kept, so going back still works), recorded
after a checkpoint of its own when the actor has a recorder, so it can be undone by a
rewind to that checkpoint. The summarizer's request goes through the turn loop's
``ask_aside``: it obeys the actor's cancel token and wall-clock deadline.

What is never summarized — the system prompt, the tool descriptions and the first brief —
must leave ``ROOM`` of the window below the threshold. When it does not, a summary would
be due again every step or two (a loop of summaries, each as large as the last), so the
window is too small: ``ContextTooSmall`` ends the turn with one clear message instead.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tilth.agent.turn import Actor, ask_aside
from tilth.errors import ContextOverflow, ContextTooSmall, ModelError
from tilth.model.endpoint_facts import DEFAULT_CONTEXT_TOKENS
from tilth.session.threads import StoredMessage
from tilth.timeline.rewind.summarize import summarize_span

if TYPE_CHECKING:
    from tilth.config import Settings
    from tilth.model.base import Model

THRESHOLD = 0.9
ROOM = 0.2
"""The share of the window below ``THRESHOLD`` left for the conversation proper: a few steps."""
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

    @property
    def target(self) -> int:
        """The most that what is never summarized may take (else the window is too small)."""
        return int(self.window * (THRESHOLD - ROOM))

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
        """Summarize the oldest turns when the next request would pass the threshold.

        Raises ``ContextTooSmall`` when summarizing cannot make room in this window.
        """
        estimate = self.estimate(actor.thread.messages(), tools)
        if estimate < self.limit:
            return
        why = (
            f"the conversation is about {estimate:,} tokens, near the model's context "
            f"window of {self.window:,}"
        )
        self._make_room(actor, tools, why, estimate, MAX_COMPACTIONS_PER_REQUEST)

    def after_overflow(
        self, actor: Actor, overflow: ContextOverflow, tools: list[dict[str, Any]]
    ) -> bool:
        """After the server refused a request for its size: summarize once (True: retry)."""
        if overflow.window:
            self.window = overflow.window
        if overflow.prompt_tokens:
            self._measured = (overflow.prompt_tokens, _chars(actor.thread.messages(), tools))
        said = f" ({overflow.prompt_tokens:,} tokens)" if overflow.prompt_tokens else ""
        why = f"the server refused the request as longer than its context window{said}"
        return self._make_room(actor, tools, why, overflow.prompt_tokens, 1)

    def _make_room(
        self,
        actor: Actor,
        tools: list[dict[str, Any]],
        why: str,
        estimate: int | None,
        rounds: int,
    ) -> bool:
        """Summarize (up to ``rounds`` times) until the prompt is under the threshold.

        True when something was summarized. Raises ``ContextTooSmall`` when what is never
        summarized (the system prompt, the tools, the first brief) leaves too little room
        (under ``ROOM`` of the window): a summary would be due again every step or two.
        """
        head = self._head_estimate(actor, tools)
        if head is not None and head >= self.target:
            actor.session.log("context_too_small", **actor.scope(), window=self.window, head=head)
            raise ContextTooSmall(self.window, head)
        compacted = False
        for _ in range(rounds):
            if not self.compact(actor, why, estimate=estimate):
                break
            compacted = True
            estimate = self.estimate(actor.thread.messages(), tools)
            if estimate < self.limit:
                break
            why = f"the conversation is still about {estimate:,} tokens after a summary"
        return compacted

    def _head_estimate(self, actor: Actor, tools: list[dict[str, Any]]) -> int | None:
        """The prompt size of what is never summarized (None before the server counted one)."""
        if self._measured is None:
            return None  # a first guess from the characters is too rough to stop on
        stored = actor.thread.read()
        return self.estimate([m.message for m in stored[: _head_length(stored)]], tools)

    def compact(self, actor: Actor, why: str, *, estimate: int | None = None) -> bool:
        """Summarize the oldest part of ``actor``'s thread; False when nothing could be."""
        parts = oldest_part(actor.thread.read())
        if parts is None:
            actor.session.log("context_full", **actor.scope(), reason=why, window=self.window)
            return False
        label = f"before summarizing {len(parts[1])} older message(s): context nearly full"
        checkpoint = self.checkpoint(label) if self.checkpoint is not None else None
        # The summarizer is an actor of the turn loop too: its request is cancelled with the
        # turn (Ctrl-C, a stop button) and at the wall-clock deadline, and its retries shown.
        summarizer = replace(
            actor, name="summarizer", toolbox=None, control_schemas=[], on_delta=None, context=None
        )
        try:
            result = summarize_span(
                actor.session,
                actor.thread,
                parts,
                "up-to",
                actor.model,
                checkpoint,
                max_chars=self.window * FIRST_GUESS_CHARS_PER_TOKEN // 2,
                asker=lambda request: ask_aside(summarizer, request),
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
    start = _head_length(stored)
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


def _head_length(stored: list[StoredMessage]) -> int:
    """How many leading messages are never summarized: the system prompt and the first brief."""
    start = 0
    while start < len(stored) and stored[start].message.get("role") == "system":
        start += 1
    if start < len(stored) and stored[start].message.get("role") == "user":
        start += 1
    return start
