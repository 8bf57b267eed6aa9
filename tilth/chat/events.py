"""What a chat engine tells its front end while a turn runs: one event type, one callback.

Every event is a ``ChatEvent(type, data)`` whose ``data`` is plain JSON, so the terminal
renders it directly and the web UI forwards ``event.to_dict()`` as a server-sent event.

- ``turn_started``: ``turn``, ``checkpoint`` (its id), ``prompt``
- ``text`` / ``reasoning``: ``text`` (a piece of the reply), ``tokens`` (completion so far)
- ``tool_started``: ``call_id``, ``name``, ``args``, ``summary`` (one line)
- ``tool_finished``: ``call_id``, ``name``, ``ok``, ``blocked``, ``result`` (a preview),
  ``diff`` (edit tools)
- ``confirm_asked``: ``command``, ``reason``, ``approved`` (after the callback answered)
- ``notice``: ``text`` (something the user should know; not an error), ``kind`` when it
  comes from the turn loop: ``retry`` (a model call failed and is retried), ``cut_off``
  (the reply hit the reply-length limit, or only repeated itself), ``compacted`` (the
  oldest turns were summarized to fit the model's context window), ``stopped`` (the
  harness ended the turn: the model repeated a failing call, or made too many calls)
- ``turn_finished``: ``turn``, ``checkpoint``, ``outcome`` (``done``, ``cancelled``,
  ``stopped``, ``error``), ``error``, ``files_changed``, ``gaps``, ``tokens_used``,
  ``turn_tokens``
- ``rewound``: ``op`` (``rewind``, ``undo``), ``target``, ``turn``, ``scope``, ``prompt``
  (to put back in the input box, or null), ``files``, ``conflicts``
- ``forked``: ``session_id``, ``directory``, ``checkpoint``, ``turn``
- ``summarized``: ``checkpoint``, ``turn``, ``direction``, ``replaced``, ``summary``

Listeners are called on the thread that runs the turn; a slow listener slows the turn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tilth.model import call

EVENT_TYPES = (
    "turn_started",
    "text",
    "reasoning",
    "tool_started",
    "tool_finished",
    "confirm_asked",
    "notice",
    "turn_finished",
    "rewound",
    "forked",
    "summarized",
)


@dataclass(frozen=True)
class ChatEvent:
    """One thing that happened in a chat, for a front end to show."""

    type: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """``{"type": ..., **data}``: the JSON a web client receives."""
        return {"type": self.type, **self.data}


Listener = Callable[[ChatEvent], None]
"""Receives every event of a chat engine."""

Confirm = Callable[[str, str], bool]
"""``(command, reason) → approve?`` for a ``bash`` command the guard flags as risky.

Without one (a web handler, piped stdin) a flagged command is refused.
"""


CancelToken = call.CancelToken
"""Set from another thread (Ctrl-C, a stop button) to end the turn in flight early."""

TurnCancelled = call.Cancelled
"""Raised inside a turn when its ``CancelToken`` was set (never leaves the engine)."""
