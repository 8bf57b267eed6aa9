"""The fake server's answers as Chat Completions JSON: a whole reply, or its stream chunks.

Streamed replies are cut as real providers cut them: text and reasoning in short pieces,
``reasoning_details`` entries in parts, and tool-call arguments in uneven pieces, small
ones first (splits land mid-token), so a client's reassembly is tested for real. A reply
longer than the request's ``max_tokens`` is cut there, as llama.cpp cuts it (``within_limit``).
"""

from __future__ import annotations

import json
import math
import re
import time
from typing import Any

from tilth.model.script import Reply, arguments_text, finish_reason_of

_CHUNK_CHARS = 16
_ARGUMENT_PIECES = (1, 3, 7, 2, 5, 11)
"""A tool call's arguments start in pieces of these sizes (splits land mid-token)..."""
_LATER_ARGUMENT_PIECES = (40, 61, 97)
"""...and go on in pieces of these, in turn: a long file's content in five-character
pieces made a scripted call cost 70 ms of CPU (the client parses every chunk), and the
small pieces at the start test the same reassembly."""


CHARS_PER_PROMPT_TOKEN = 3.5
"""How the fake server counts a prompt: about what a real tokenizer makes of code and JSON."""


def prompt_tokens(body: dict[str, Any]) -> int:
    """The prompt tokens of a request, counted from its messages and tools (characters, so
    ``é`` counts one wherever it is, also in arguments a client sent as ``\\u00e9``)."""
    size = len(json.dumps(_unescaped(body.get("messages") or []), ensure_ascii=False))
    size += len(json.dumps(body.get("tools") or [], ensure_ascii=False))
    return math.ceil(size / CHARS_PER_PROMPT_TOKEN)


_UNICODE_ESCAPE = re.compile(
    r"\\\\|\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})|\\u([0-9a-f]{4})", re.IGNORECASE
)


def _unescaped(messages: Any) -> Any:
    """``messages`` with each tool call's arguments holding its characters beyond ASCII as
    they are rather than as ``\\uXXXX`` escapes (the same JSON, as long as it reads)."""
    if not isinstance(messages, list):
        return messages
    found = []
    for message in messages:
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if isinstance(calls, list) and any(_escaped_call(call) for call in calls):
            message = {**message, "tool_calls": [_unescaped_call(call) for call in calls]}
        found.append(message)
    return found


def _escaped_call(call: Any) -> bool:
    function = call.get("function") if isinstance(call, dict) else None
    arguments = function.get("arguments") if isinstance(function, dict) else None
    return isinstance(arguments, str) and "\\u" in arguments


def _unescaped_call(call: Any) -> Any:
    if not _escaped_call(call):
        return call
    function = call["function"]
    text = _UNICODE_ESCAPE.sub(_character, function["arguments"])
    return {**call, "function": {**function, "arguments": text}}


def _character(match: re.Match[str]) -> str:
    """The character a ``\\uXXXX`` escape (or surrogate pair) stands for, beyond ASCII."""
    high, low, single = match.groups()
    if high is not None:
        return chr(0x10000 + ((int(high, 16) - 0xD800) << 10) + (int(low, 16) - 0xDC00))
    if single is not None:
        code = int(single, 16)
        if code >= 0x80 and not 0xD800 <= code < 0xE000:
            return chr(code)
    return match.group(0)  # an escaped backslash, ASCII, or a lone surrogate: as sent


def reply_tokens(reply: Reply) -> int:
    """The completion tokens of a scripted reply, counted as a prompt is: its reasoning, text
    and tool-call arguments."""
    size = len(reply.get("reasoning") or "") + len(reply["content"] or "")
    size += sum(len(arguments_text(call)) for call in reply["tool_calls"])
    return math.ceil(size / CHARS_PER_PROMPT_TOKEN)


def within_limit(reply: Reply, body: dict[str, Any]) -> Reply:
    """``reply`` cut at the request's ``max_tokens`` (or ``max_completion_tokens``), as
    llama.cpp stops generating: what fits is kept in the order it streams (reasoning, text,
    then each call's arguments, cut mid-way, later calls dropped), ``finish_reason`` is
    ``length`` and ``usage.completion_tokens`` the limit. A reply that fits is unchanged."""
    limit = body.get("max_tokens", body.get("max_completion_tokens"))
    if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
        return reply
    if reply_tokens(reply) <= limit:
        return reply
    left = math.floor(limit * CHARS_PER_PROMPT_TOKEN)

    def take(text: str) -> str:
        nonlocal left
        kept = text[: max(left, 0)]
        left -= len(kept)
        return kept

    cut: Reply = dict(reply)
    if reply.get("reasoning") is not None:
        cut["reasoning"] = take(reply["reasoning"] or "")
    content = reply["content"]
    cut["content"] = take(content) if content else content
    calls = []
    for call in reply["tool_calls"]:
        if left <= 0:
            break
        calls.append({**call, "arguments": take(arguments_text(call))})
    cut["tool_calls"] = calls
    cut["finish_reason"] = "length"
    if reply.get("usage") is not None:
        cut["usage"] = {**reply["usage"], "completion_tokens": limit}
    return cut


def invalid_arguments(body: dict[str, Any]) -> dict[str, Any] | None:
    """llama.cpp's HTTP 500 body for a history holding tool-call arguments that are not a
    JSON object."""
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            text = function.get("arguments") if isinstance(function, dict) else None
            if not isinstance(text, str):
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                return {
                    "error": {
                        "code": 500,
                        "message": "Failed to parse tool call arguments as JSON: "
                        f"[json.exception.parse_error.101] parse error at line {exc.lineno}, "
                        f"column {exc.colno}: {exc.msg}",
                        "type": "server_error",
                    }
                }
            if not isinstance(value, dict):  # the template iterates the arguments' items
                return {
                    "error": {
                        "code": 500,
                        "message": "Failed to apply the chat template: tool call arguments "
                        "are not an object",
                        "type": "server_error",
                    }
                }
    return None


def unanswered_call(body: dict[str, Any]) -> dict[str, Any] | None:
    """OpenAI's HTTP 400 body for a history with a tool call no tool message answers."""
    open_ids: list[str] = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "tool":
            if message.get("tool_call_id") in open_ids:
                open_ids.remove(message["tool_call_id"])
            continue
        if open_ids:
            break
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict):
                open_ids.append(str(call.get("id")))
    if not open_ids:
        return None
    return {
        "error": {
            "code": 400,
            "message": "An assistant message with 'tool_calls' must be followed by tool "
            "messages responding to each 'tool_call_id'. The following tool_call_ids did not "
            f"have response messages: {', '.join(open_ids)}",
            "type": "invalid_request_error",
        }
    }


def context_refusal(body: dict[str, Any], n_ctx: int) -> dict[str, Any] | None:
    """llama.cpp's HTTP 400 body for a prompt longer than the context (None: it fits)."""
    tokens = prompt_tokens(body)
    if tokens <= n_ctx:
        return None
    return {
        "error": {
            "code": 400,
            "message": f"request ({tokens} tokens) exceeds the available context size "
            f"({n_ctx} tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": tokens,
            "n_ctx": n_ctx,
        }
    }


def _usage(reply: Reply) -> dict[str, int] | None:
    usage = reply.get("usage")
    if usage is None:
        return None
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def completion_body(completion_id: str, model: str, reply: Reply) -> dict[str, Any]:
    """A non-streaming ``chat.completion`` body."""
    message: dict[str, Any] = {"role": "assistant", "content": reply["content"]}
    if reply["tool_calls"]:
        message["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": arguments_text(call)},
            }
            for call in reply["tool_calls"]
        ]
    if reply.get("reasoning") is not None:
        message["reasoning"] = reply["reasoning"]
    if reply.get("reasoning_details") is not None:
        message["reasoning_details"] = reply["reasoning_details"]
    payload: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason_of(reply)}],
    }
    usage = _usage(reply)
    if usage is not None:
        payload["usage"] = usage
    return payload


def _pieces(text: str) -> list[str]:
    return [text[i : i + _CHUNK_CHARS] for i in range(0, len(text), _CHUNK_CHARS)]


def _detail_pieces(detail: Any) -> list[Any]:
    """A ``reasoning_details`` entry as OpenRouter streams it: its text in several pieces."""
    if not isinstance(detail, dict) or not isinstance(detail.get("text"), str):
        return [detail]
    parts = _pieces(detail["text"]) or [""]
    return [{**detail, "text": part} for part in parts]


def _argument_pieces(text: str) -> list[str]:
    """``text`` cut into uneven pieces, as providers stream tool-call arguments."""
    pieces, start, turn = [], 0, 0
    later = len(_LATER_ARGUMENT_PIECES)
    while start < len(text):
        if turn < len(_ARGUMENT_PIECES):
            size = _ARGUMENT_PIECES[turn]
        else:
            size = _LATER_ARGUMENT_PIECES[(turn - len(_ARGUMENT_PIECES)) % later]
        pieces.append(text[start : start + size])
        start, turn = start + size, turn + 1
    return pieces


def stream_chunks(
    completion_id: str, model: str, reply: Reply, body: dict[str, Any]
) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of a streamed reply, in order."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"reasoning": piece}) for piece in _pieces(reply.get("reasoning") or "")]
    for detail in reply.get("reasoning_details") or []:
        chunks += [chunk({"reasoning_details": [piece]}) for piece in _detail_pieces(detail)]
    chunks += [chunk({"content": piece}) for piece in _pieces(reply["content"] or "")]
    for index, call in enumerate(reply["tool_calls"]):
        opening = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": ""},
        }
        chunks.append(chunk({"tool_calls": [opening]}))
        chunks += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in _argument_pieces(arguments_text(call))
        ]
    chunks.append(chunk({}, finish_reason_of(reply)))
    options = body.get("stream_options") or {}
    usage = _usage(reply)
    if isinstance(options, dict) and options.get("include_usage") and usage is not None:
        chunks.append(
            {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": usage,
            }
        )
    return chunks
