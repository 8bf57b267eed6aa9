"""The one script format: canned model replies for the scripted model, the fake server and tests.

A script is a queue of *reply dicts*, plain JSON so it can live in a file:

- ``{"type": "reply", "content", "tool_calls": [{"name", "arguments"}], "usage",
  "finish_reason", "reasoning", "reasoning_details"}`` — one assistant turn (``usage`` left
  out counts ``DEFAULT_USAGE``, as ``reply()`` does; ``null`` means the provider sent none);
- ``{"type": "error", "status", "message", "retry_after"?}`` — the call fails (HTTP ``status``,
  with a ``Retry-After`` header when given, from the fake server; ``ModelError`` from the
  scripted model);
- ``{"type": "delay", "seconds", "then"}`` — wait, then answer with ``then``;
- ``{"type": "stall", "seconds", "after", "then"}`` — a streamed answer stops after ``after``
  chunks of ``then`` for ``seconds`` before the rest (unstreamed: a delay);
- ``{"type": "raw", "status", "body", "content_type"}`` — the fake server sends ``body`` as is
  (odd providers: HTML pages, errors inside a 200); the scripted model cannot play it.

``Script`` hands them out one per call, per model name (``"*"`` answers any model), or from a
function for dynamic answers. Tool calls get ids ``call_1``, ``call_2``… in the order the script
serves them, so runs are repeatable. A key that is not one of its type's (a typo such as
``"contnt"``) is an error naming the reply, never silently ignored.
"""

from __future__ import annotations

import copy
import difflib
import json
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tilth.errors import ModelError, UsageError
from tilth.model.base import AssistantTurn, ToolCall, Usage

Reply = dict[str, Any]
ReplyFunction = Callable[[str, dict[str, Any]], Reply]

ANY_MODEL = "*"
_KINDS = ("reply", "error", "delay", "stall", "raw")
WAITS = ("delay", "stall")
"""Reply types that wrap another reply (``then``) and add a wait."""
DEFAULT_USAGE = {"prompt_tokens": 10, "completion_tokens": 5}
"""What a scripted turn costs when its reply names no usage (``reply()`` and JSON alike): small
but not zero, so token counts and ``TILTH_MAX_TOKENS`` move in a scripted run."""
_KEYS = {
    "reply": ("type", "content", "tool_calls", "usage", "finish_reason", "reasoning",
              "reasoning_details"),
    "error": ("type", "status", "message", "retry_after"),
    "delay": ("type", "seconds", "then"),
    "stall": ("type", "seconds", "after", "then"),
    "raw": ("type", "status", "body", "content_type"),
}  # fmt: skip
_CALL_KEYS = ("name", "arguments", "id")


def tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    """A tool call with JSON-object arguments."""
    return {"name": name, "arguments": arguments}


def tool_call_raw(name: str, text: str) -> dict[str, Any]:
    """A tool call whose arguments are sent verbatim (to simulate malformed JSON)."""
    return {"name": name, "arguments": text}


def reply(
    content: str | None = None,
    *calls: dict[str, Any],
    prompt_tokens: int = DEFAULT_USAGE["prompt_tokens"],
    completion_tokens: int = DEFAULT_USAGE["completion_tokens"],
    finish_reason: str | None = None,
    reasoning: str | None = None,
    reasoning_details: list[Any] | None = None,
) -> Reply:
    """One assistant turn; ``finish_reason`` defaults to ``tool_calls`` or ``stop``."""
    return {
        "type": "reply",
        "content": content,
        "tool_calls": [dict(call) for call in calls],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
        "finish_reason": finish_reason,
        "reasoning": reasoning,
        "reasoning_details": reasoning_details,
    }


def error(status: int, message: str = "scripted error") -> Reply:
    """A failed call: the fake server answers with HTTP ``status``."""
    return {"type": "error", "status": status, "message": message}


def delay(seconds: float, then: Reply) -> Reply:
    """Wait ``seconds`` before answering with ``then`` (for timeout and slowness tests)."""
    return {"type": "delay", "seconds": seconds, "then": then}


def stall(seconds: float, then: Reply, after: int = 2) -> Reply:
    """Stream ``after`` chunks of ``then``, go silent for ``seconds``, then send the rest."""
    return {"type": "stall", "seconds": seconds, "after": after, "then": then}


def raw(body: str, status: int = 200, content_type: str = "application/json") -> Reply:
    """An HTTP answer the fake server sends verbatim (to imitate a misbehaving provider)."""
    return {"type": "raw", "status": status, "body": body, "content_type": content_type}


def empty() -> Reply:
    """A turn with no content and no tool calls (a provider's empty response)."""
    return reply(None)


def check_reply(value: Any, where: str = "reply") -> Reply:
    """``value`` as a well-formed reply dict (defaults filled in); raises ``UsageError``."""
    if not isinstance(value, dict):
        raise UsageError(f"{where}: expected an object, got {type(value).__name__}")
    kind = value.get("type", "reply")
    if kind not in _KINDS:
        raise UsageError(f"{where}: unknown type {kind!r} (expected one of {', '.join(_KINDS)})")
    _known_keys(
        value, _KEYS[kind], where, "a reply" if kind == "reply" else f"a reply of type {kind!r}"
    )
    if kind == "error":
        status = value.get("status")
        if not isinstance(status, int) or not 400 <= status <= 599:
            raise UsageError(f"{where}: error status must be an HTTP error code, got {status!r}")
        checked: Reply = {
            "type": "error",
            "status": status,
            "message": str(value.get("message", "")),
        }
        retry_after = value.get("retry_after")
        if retry_after is not None:
            if not isinstance(retry_after, int | float) or retry_after < 0:
                raise UsageError(f"{where}: retry_after must be a non-negative number of seconds")
            checked["retry_after"] = retry_after
        return checked
    if kind == "raw":
        status = value.get("status", 200)
        if not isinstance(status, int) or not 200 <= status <= 599:
            raise UsageError(f"{where}: raw status must be an HTTP status code, got {status!r}")
        if not isinstance(value.get("body"), str):
            raise UsageError(f"{where}: raw body must be a string")
        content_type = str(value.get("content_type") or "application/json")
        return {
            "type": "raw",
            "status": status,
            "body": value["body"],
            "content_type": content_type,
        }
    if kind == "delay":
        seconds = value.get("seconds")
        if not isinstance(seconds, int | float) or seconds < 0:
            raise UsageError(f"{where}: delay seconds must be a non-negative number")
        then = check_reply(value.get("then"), f"{where}.then")
        return {"type": "delay", "seconds": seconds, "then": then}
    if kind == "stall":
        seconds, after = value.get("seconds"), value.get("after", 2)
        if not isinstance(seconds, int | float) or seconds < 0:
            raise UsageError(f"{where}: stall seconds must be a non-negative number")
        if not isinstance(after, int) or after < 0:
            raise UsageError(f"{where}: stall after must be a non-negative number of chunks")
        then = check_reply(value.get("then"), f"{where}.then")
        return {"type": "stall", "seconds": seconds, "after": after, "then": then}
    calls = value.get("tool_calls") or []
    if not isinstance(calls, list):
        raise UsageError(f"{where}: tool_calls must be a list")
    checked_calls = []
    for index, call in enumerate(calls):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise UsageError(f"{where}: each tool call needs a string name")
        _known_keys(call, _CALL_KEYS, f"{where}.tool_calls[{index}]", "a tool call")
        arguments = call.get("arguments", {})
        if not isinstance(arguments, dict | str):
            raise UsageError(f"{where}: tool call arguments must be an object or a string")
        checked_calls.append({**call, "arguments": arguments})
    content = value.get("content")
    if content is not None and not isinstance(content, str):
        raise UsageError(f"{where}: content must be a string or null")
    usage = _checked_usage(value.get("usage", {}), f"{where}.usage")
    return {
        "type": "reply",
        "content": content,
        "tool_calls": checked_calls,
        # None means "the provider reported no usage".
        "usage": usage,
        "finish_reason": value.get("finish_reason"),
        "reasoning": value.get("reasoning"),
        "reasoning_details": value.get("reasoning_details"),
    }


def _known_keys(value: dict[str, Any], known: tuple[str, ...], where: str, what: str) -> None:
    """Refuse a key ``known`` lacks: a typo would otherwise be silently ignored."""
    for key in value:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            guess = f"did you mean {close[0]!r}? " if close else ""
            raise UsageError(
                f"{where}: unknown key {key!r} in {what} ({guess}known: {', '.join(known)})"
            )


def _checked_usage(usage: Any, where: str) -> dict[str, int] | None:
    """``usage`` with ``DEFAULT_USAGE`` for what it leaves out; None stays None (none sent)."""
    if usage is None:
        return None
    if not isinstance(usage, dict):
        raise UsageError(f"{where}: usage must be an object or null")
    _known_keys(usage, tuple(DEFAULT_USAGE), where, "usage")
    checked = {**DEFAULT_USAGE, **usage}
    for key, count in checked.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise UsageError(f"{where}: {key} must be a non-negative integer, got {count!r}")
    return checked


def arguments_text(call: dict[str, Any]) -> str:
    """A scripted tool call's arguments as the JSON text a provider would send: characters
    beyond ASCII as they are (as llama.cpp sends them), a text given as text unchanged."""
    arguments = call.get("arguments", {})
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def finish_reason_of(reply_dict: Reply) -> str:
    """The scripted finish reason, or what a provider would say for this turn."""
    explicit = reply_dict.get("finish_reason")
    if explicit:
        return str(explicit)
    return "tool_calls" if reply_dict.get("tool_calls") else "stop"


def turn_from_reply(reply_dict: Reply) -> AssistantTurn:
    """The ``AssistantTurn`` a reply stands for; error replies raise ``ModelError``.

    Delays are unwrapped without waiting; tool calls without an id get ``call_<n>``.
    """
    checked = check_reply(reply_dict)
    while checked["type"] in WAITS:
        checked = checked["then"]
    if checked["type"] == "error":
        raise ModelError(f"scripted error: HTTP {checked['status']}: {checked['message']}")
    if checked["type"] == "raw":
        raise ModelError("a raw HTTP reply can only be played by the fake server")
    calls = [
        ToolCall(
            id=str(call.get("id") or f"call_{number}"),
            name=call["name"],
            arguments=arguments_text(call),
        )
        for number, call in enumerate(checked["tool_calls"], start=1)
    ]
    usage = checked["usage"] or {}
    return AssistantTurn(
        content=checked["content"],
        tool_calls=calls,
        usage=Usage(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        ),
        finish_reason=finish_reason_of(checked),
        reasoning=checked["reasoning"],
        reasoning_details=checked["reasoning_details"],
    )


class Script:
    """Replies handed out one per call; thread-safe.

    ``replies`` is a list (for any model), a dict ``{model: [...], "*": [...]}`` (a model's own
    queue first, then the ``"*"`` queue), or a function ``(model, request) -> reply``. An
    exhausted script answers ``error(500, "script exhausted for model X")`` so tests fail loudly.
    """

    def __init__(self, replies: list[Reply] | dict[str, list[Reply]] | ReplyFunction) -> None:
        self._lock = threading.Lock()
        self._function: ReplyFunction | None = None
        self._queues: dict[str, deque[Reply]] = {}
        self._calls_served = 0
        if callable(replies):
            self._function = replies
        elif isinstance(replies, list):
            self._queues[ANY_MODEL] = deque(_checked_list(replies, "script"))
        elif isinstance(replies, dict):
            for model, queue in replies.items():
                if not isinstance(queue, list):
                    raise UsageError(f"script: replies for {model!r} must be a list")
                self._queues[str(model)] = deque(_checked_list(queue, f"script[{model!r}]"))
        else:
            raise UsageError("script: expected a list of replies, a dict of lists or a function")
        self._source = copy.deepcopy(replies) if self._function is None else None

    @classmethod
    def from_file(cls, path: Path | str) -> Script:
        """Load a script saved as JSON (a list or a ``{model: [...]}`` object)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UsageError(f"cannot read script {path}: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            message = f"script {path} is not valid JSON: {exc.msg} (line {exc.lineno})"
            raise UsageError(message) from None
        if not isinstance(data, list | dict):
            raise UsageError(f"script {path} must hold a list or an object of lists")
        try:
            return cls(data)
        except UsageError as exc:
            raise UsageError(f"script {path}: {exc.message}") from None

    def to_json(self) -> str:
        """The script as given, as JSON text ``from_file`` reads back."""
        if self._source is None:
            raise TypeError("a script built from a function cannot be saved as JSON")
        return json.dumps(self._source, indent=2, ensure_ascii=False)

    @property
    def models(self) -> list[str]:
        """Model names the script has queues for (``"*"`` excluded)."""
        return [name for name in self._queues if name != ANY_MODEL]

    def remaining(self, model: str | None = None) -> int:
        """Replies still queued for ``model`` (its own queue plus ``"*"``), or in total."""
        with self._lock:
            if model is None:
                return sum(len(queue) for queue in self._queues.values())
            own = len(self._queues.get(model, ())) if model != ANY_MODEL else 0
            return own + len(self._queues.get(ANY_MODEL, ()))

    def next(self, model: str, request: dict[str, Any]) -> Reply:
        """The reply for this call (a fresh copy, tool calls numbered)."""
        with self._lock:
            if self._function is not None:
                chosen = check_reply(self._function(model, request), "script function reply")
            else:
                queue = self._queues.get(model)
                if not queue:
                    queue = self._queues.get(ANY_MODEL)
                if not queue:
                    return error(500, f"script exhausted for model {model}")
                chosen = queue.popleft()
            return self._numbered(copy.deepcopy(chosen))

    def _numbered(self, chosen: Reply) -> Reply:
        inner = chosen
        while inner["type"] in WAITS:
            inner = inner["then"]
        if inner["type"] == "reply":
            for call in inner["tool_calls"]:
                if not call.get("id"):
                    self._calls_served += 1
                    call["id"] = f"call_{self._calls_served}"
        return chosen


def _checked_list(replies: list[Any], where: str) -> list[Reply]:
    return [check_reply(item, f"{where}[{index}]") for index, item in enumerate(replies)]
