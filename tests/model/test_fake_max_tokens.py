"""The fake server honours ``max_tokens`` as llama.cpp does: a longer reply is cut there."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from tests.chat.test_chat_wild import chat
from tilth.config import Endpoint
from tilth.model import FakeServer, OpenAIModel, Script, reply, tool_call
from tilth.model.fake_replies import CHARS_PER_PROMPT_TOKEN

USER = [{"role": "user", "content": "go"}]
TEXT = "".join(f"word{n} " for n in range(60))  # 420 characters, about 120 tokens


def _model(server: FakeServer, limit: int | None) -> OpenAIModel:
    endpoint = Endpoint("worker", server.base_url, "k", "m")
    return OpenAIModel(endpoint, max_retries=0, max_reply_tokens=limit)


def _plain(server: FakeServer, body: dict[str, Any]) -> dict[str, Any]:
    data = json.dumps({"model": "m", "messages": USER, **body}).encode()
    request = urllib.request.Request(server.base_url + "/chat/completions", data=data)
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def test_a_streamed_text_longer_than_max_tokens_is_cut_with_finish_length() -> None:
    with FakeServer(Script([reply(TEXT), reply(TEXT)])) as server:
        cut = _model(server, 20).complete(USER, [])
        whole = _model(server, 8192).complete(USER, [])
    kept = int(20 * CHARS_PER_PROMPT_TOKEN)
    assert cut.content == TEXT[:kept] and cut.finish_reason == "length"
    assert cut.usage.completion_tokens == 20
    assert (whole.content, whole.finish_reason, whole.usage.completion_tokens) == (TEXT, "stop", 5)


def test_tool_call_arguments_are_cut_mid_way_and_later_calls_dropped() -> None:
    write = tool_call("write_file", path="a.py", content="print('hello')\n" * 40)
    scripted = reply("Writing.", write, tool_call("read_file", path="a.py"))
    with FakeServer(Script([scripted, scripted])) as server:
        body = _plain(server, {"max_tokens": 30})
        streamed = _model(server, 30).complete(USER, [])
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length" and body["usage"]["completion_tokens"] == 30
    message = choice["message"]
    assert message["content"] == "Writing."
    (call,) = message["tool_calls"]
    arguments = json.dumps(write["arguments"])
    left = int(30 * CHARS_PER_PROMPT_TOKEN) - len("Writing.")
    assert call["function"] == {"name": "write_file", "arguments": arguments[:left]}
    assert streamed.finish_reason == "length"
    assert [c.arguments for c in streamed.tool_calls] == [arguments[:left]]


def test_without_max_tokens_or_within_it_the_reply_is_whole() -> None:
    with FakeServer(Script([reply(TEXT), reply("short")])) as server:
        body = _plain(server, {})
        small = _plain(server, {"max_completion_tokens": 2})
    assert body["choices"][0]["message"]["content"] == TEXT
    assert body["choices"][0]["finish_reason"] == "stop"
    assert small["choices"][0]["message"]["content"] == "short"  # 5 characters: 2 tokens


def test_a_chat_whose_write_outgrows_the_reply_limit_is_told_and_goes_on(
    tmp_path: Path,
) -> None:
    """The path of the user trial: the server cuts a long write_file; Tilth says so."""
    write = tool_call("write_file", path="a.py", content="x = 1\n" * 200)
    replies = [reply(None, write), reply("I will write it in parts.")]
    with FakeServer(Script({"worker": replies})) as server:
        result = chat(tmp_path, ["write a.py"], server, TILTH_MAX_REPLY_TOKENS="64")
        second = server.requests[1]["body"]["messages"]
    assert result.returncode == 0, result.stderr
    assert "note: the reply hit the reply-length limit (64 tokens)" in result.stdout
    assert "was cut off and not run" in second[-1]["content"]
    assert not (tmp_path / "work" / "a.py").exists()
    assert "I will write it in parts." in result.stdout


def test_a_cut_inside_an_escape_or_a_multi_byte_character_leaves_a_prefix_of_the_arguments() -> (
    None
):
    """Each limit cuts somewhere else: inside ``\\u00e9``, ``\\n``, ``\\\\``, a surrogate pair."""
    write = tool_call("write_file", path="a.py", content='"é🎉\n\t\\ \x01' * 4)
    whole = json.dumps(write["arguments"])
    scripted = reply("hé🎉", write, tool_call("read_file", path="b"))
    with FakeServer(Script([scripted] * 40)) as server:
        cuts = [_model(server, limit).complete(USER, []) for limit in range(1, 41)]
    assert all(c.finish_reason == "length" and c.content == "hé🎉" for c in cuts)
    assert all(len(c.tool_calls) <= 1 for c in cuts), "the read_file after the cut is dropped"
    kept = [c.tool_calls[0].arguments for c in cuts if c.tool_calls]
    assert len(kept) == 39 and all(whole.startswith(a) and a != whole for a in kept)
    assert len({len(a) for a in kept}) == 39, "every limit cuts at a new place"
