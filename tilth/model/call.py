"""One model request as every actor makes it: cancellable, bounded in time, never endless.

``ask`` runs ``model.complete`` on a thread of its own, so the caller is never held by a
reply that does not start or a stream that stalls: a set ``CancelToken`` or a passed
``deadline`` abandons the call at once (``Cancelled``, ``DeadlineReached``), and whatever
the call brings later is dropped (its pieces no longer reach ``on_delta``, and a failure
it meets is not retried). A reply whose
text, or whose tool-call arguments, only repeat themselves is cut short: the stream is
closed and the turn comes back with ``finish_reason`` ``"repetition"`` (and without the
call whose arguments were cut: they are not JSON, and running half of them would be worse).
"""

from __future__ import annotations

import json
import math
import threading
import time
from typing import Any

from tilth.model.base import AssistantTurn, Delta, Model, OnDelta, RetryHook, Usage
from tilth.model.stream import CHARS_PER_TOKEN

POLL_SECONDS = 0.05
"""How often a waiting call looks at its cancel token and deadline."""
REPETITION = "repetition"
"""The ``finish_reason`` of a reply cut short because it only repeated itself."""
_REPEAT_SPAN = 1_200
"""Characters at the end of a reply that must be one short piece over and over..."""
_REPEAT_PERIOD = 300
"""...whose length is at most this."""
_CHECK_EVERY = 256
_KEPT_CHARS = 2_000
"""A repeating reply keeps this much of its text (the repeats say nothing new)."""


class CancelToken:
    """Set from another thread (Ctrl-C, a stop button) to end the turn in flight early.

    The turn stops at the next safe point: at once while it waits for the model (the
    call is abandoned and its reply, if one ever comes, dropped), or between tool calls.
    A tool already running finishes first, so the thread and the checkpoint stay
    consistent (every tool call the model made gets an answer).
    """

    def __init__(self) -> None:
        self._set = False

    def cancel(self) -> None:
        self._set = True

    @property
    def cancelled(self) -> bool:
        return self._set


class Cancelled(Exception):
    """The ``CancelToken`` was set while the turn ran."""


class DeadlineReached(Exception):
    """The deadline passed while the reply was still awaited or streaming."""


class _Repeating(Exception):
    """Raised inside the stream to close it: the text only repeats itself."""


class RepetitionGuard:
    """Watches a reply's text; ``repeating`` once its end is one short piece over and over."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self._chars = 0
        self._checked = 0

    def add(self, text: str) -> bool:
        """Take more text; True when the reply has started to only repeat itself."""
        self.parts.append(text)
        self._chars += len(text)
        if self._chars - self._checked < _CHECK_EVERY or self._chars < _REPEAT_SPAN * 2:
            return False
        self._checked = self._chars
        return is_repeating("".join(self.parts))

    def kept(self) -> str:
        text = "".join(self.parts)
        return text if len(text) <= _KEPT_CHARS else text[:_KEPT_CHARS] + " …"


def is_repeating(text: str) -> bool:
    """True when the last ``_REPEAT_SPAN`` characters repeat with a short period."""
    if len(text) < _REPEAT_SPAN * 2:
        return False
    tail = text[-_REPEAT_SPAN:]
    return any(
        text[-_REPEAT_SPAN - period : -period] == tail for period in range(1, _REPEAT_PERIOD + 1)
    )


def ask(
    model: Model,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    *,
    on_delta: OnDelta | None = None,
    on_retry: RetryHook | None = None,
    cancel: CancelToken | None = None,
    deadline: float | None = None,
) -> AssistantTurn:
    """The model's reply; raises ``Cancelled``, ``DeadlineReached`` or the model's error.

    ``deadline`` is a ``time.monotonic()`` instant.
    """
    guard = RepetitionGuard()
    arguments = RepetitionGuard()
    cut_call: list[str] = []  # the name of the call whose arguments were cut short
    gate = threading.Lock()  # no piece is shown once the caller has given up on the call
    abandoned = threading.Event()

    def relay(delta: Delta) -> None:
        with gate:
            if abandoned.is_set() or (cancel is not None and cancel.cancelled):
                raise Cancelled
            if delta.kind == "text" and guard.add(delta.text):
                raise _Repeating
            if delta.kind == "tool_call" and delta.piece and arguments.add(delta.piece):
                cut_call.append(delta.text)
                raise _Repeating
            if on_delta is not None:
                on_delta(delta)

    def retrying(attempt: int, reason: str, delay: float) -> None:
        if abandoned.is_set() or (cancel is not None and cancel.cancelled):
            raise Cancelled  # the caller gave up on the call: no retry, and no retry line
        hook = on_retry or getattr(model, "on_retry", None)  # else the model's own hook
        if hook is not None:
            hook(attempt, reason, delay)

    box: dict[str, Any] = {}
    done = threading.Event()

    def call() -> None:
        try:
            box["turn"] = model.complete(messages, tools, on_delta=relay, on_retry=retrying)
        except BaseException as exc:  # handed to the caller below, unless abandoned
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=call, name="tilth-model-call", daemon=True).start()
    while not done.wait(POLL_SECONDS):
        if (cancel is not None and cancel.cancelled) or (
            deadline is not None and time.monotonic() >= deadline
        ):
            break
    if not done.is_set():
        with gate:
            abandoned.set()
        if cancel is not None and cancel.cancelled:
            raise Cancelled
        raise DeadlineReached
    error = box.get("error")
    if isinstance(error, _Repeating):
        return _cut_short(guard, arguments, cut_call, messages)
    if error is not None:
        raise error
    turn: AssistantTurn = box["turn"]
    return turn


def _cut_short(
    text: RepetitionGuard,
    arguments: RepetitionGuard,
    cut_call: list[str],
    messages: list[dict[str, Any]],
) -> AssistantTurn:
    """The reply as far as it is worth keeping: its text, and a word on a cut call."""
    chars = len(json.dumps(messages, ensure_ascii=False))
    streamed = sum(len(part) for part in [*text.parts, *arguments.parts])
    usage = Usage(math.ceil(chars / CHARS_PER_TOKEN), math.ceil(streamed / CHARS_PER_TOKEN))
    content = text.kept()
    if cut_call:
        note = f"[a {cut_call[0]} call, cut short: its arguments only repeated the same text]"
        content = f"{content}\n{note}" if content.strip() else note
    return AssistantTurn(content=content, usage=usage, finish_reason=REPETITION)
