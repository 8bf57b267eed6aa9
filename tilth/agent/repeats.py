"""The guard against a model that repeats the same failing call, round after round.

A small model can loop: it makes a call, the call fails, and it makes the very same call
again, seeing the same error, until a cap ends the turn minutes later. ``RepeatGuard``
counts, per model reply, each failing call by what it is (tool, arguments, error text):
the reply that repeats one for the next-to-last allowed time has it answered with a plain
warning, and the reply that repeats it ``limit`` times has it answered as the stop it is;
``take_turn`` then raises ``RepeatedFailure`` once every call of that reply is answered.
The same call made several times in one reply counts once (the model had not seen the
error yet). A successful call the model had not made before (a new tool and arguments)
is progress: it starts every count afresh, so a miss the model comes back to between real
steps (a file it reads before it has written it, a command it retries once the person
allowed it) does not add up over a long stage; a round that only repeats what it did
before (the same write of the same content, the same failing calls) is the loop this
guard ends. The person's answer (the interview's ``ask_user``) is new information too:
the caller tells the guard (``heard_from_person``), and counting starts afresh. The
limit is ``TILTH_MAX_REPEATED_FAILURES`` (0: no guard).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from tilth.model.base import ToolCall


class RepeatedFailure(Exception):
    """The model made the same failing call ``count`` times in one turn; the turn stops."""

    def __init__(self, tool: str, count: int) -> None:
        self.tool = tool
        self.count = count
        self.detail = (
            f"the model repeated the same failing {tool} call {count} times "
            "(same arguments, same error)"
        )
        super().__init__(self.detail)


@dataclass
class RepeatGuard:
    """Counts identical failing calls over the replies of one turn since its last new
    successful call (``limit`` ≥ 2)."""

    limit: int
    _counts: dict[str, int] = field(default_factory=dict)
    _this_round: set[str] = field(default_factory=set)
    _done: set[str] = field(default_factory=set)
    """The successful calls seen (tool and arguments): one not among them is progress."""
    tripped: RepeatedFailure | None = None
    """Set by the reply that reached the limit; ``take_turn`` raises it."""

    def start_round(self) -> None:
        """A new model reply: its calls count afresh."""
        self._this_round = set()

    def succeeded(self, call: ToolCall) -> None:
        """``call`` succeeded: when the model had not made it before, counting starts afresh."""
        key = _signature(call, "")
        if key not in self._done:
            self._done.add(key)
            self._counts.clear()

    def heard_from_person(self) -> None:
        """The person answered the model: what failed before may succeed now."""
        self._counts.clear()

    def failed(self, call: ToolCall, error: str) -> str:
        """Count ``call`` failing with ``error``; the note to add to its answer ("" none)."""
        key = _signature(call, error)
        if key in self._this_round:
            return ""
        self._this_round.add(key)
        count = self._counts[key] = self._counts.get(key, 0) + 1
        if count >= self.limit:
            if self.tripped is None:
                self.tripped = RepeatedFailure(call.name, count)
            return (
                f"\n\n[tilth] This exact {call.name} call has now failed the same way {count} "
                "times. The harness stopped this turn: repeating it cannot help."
            )
        if count == self.limit - 1 and count >= 2:
            return (
                f"\n\n[tilth] You made this exact {call.name} call {count} times and it failed "
                "the same way each time. Do not repeat it: change the arguments, fix what the "
                "error names first, or do something else. One more identical failure stops "
                "this turn."
            )
        return ""


def guard_for(limit: int) -> RepeatGuard | None:
    """A fresh guard for one turn with ``TILTH_MAX_REPEATED_FAILURES``'s ``limit`` (0: none)."""
    return RepeatGuard(limit) if limit else None


def _signature(call: ToolCall, error: str) -> str:
    """What makes two calls the same: the tool, its arguments (as JSON values, so key order
    and spacing do not matter) and the error text ("" for a successful call)."""
    try:
        arguments = json.dumps(json.loads(call.arguments), sort_keys=True)
    except (json.JSONDecodeError, RecursionError):
        arguments = call.arguments
    text = "\0".join((call.name, arguments, error))
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
