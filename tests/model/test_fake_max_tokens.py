"""The fake server honours ``max_tokens`` as llama.cpp does: a longer reply is cut there."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from tests.chat.test_chat_wild import chat
from tilth.config import Endpoint
from tilth.model import (
    FakeServer,
    OpenAIModel,
    Script,
    reply,
    tool_call,
    tool_call_raw,
)
from tilth.model.fake_replies import CHARS_PER_PROMPT_TOKEN
from tilth.model.fake_server import LlamaManners

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
    # Arguments given as text are sent as given: here escaped, as some providers send them.
    whole = json.dumps({"path": "a.py", "content": '"é🎉\n\t\\ \x01' * 4})
    write = tool_call_raw("write_file", whole)
    scripted = reply("hé🎉", write, tool_call("read_file", path="b"))
    with FakeServer(Script([scripted] * 40)) as server:
        cuts = [_model(server, limit).complete(USER, []) for limit in range(1, 41)]
    assert all(c.finish_reason == "length" and c.content == "hé🎉" for c in cuts)
    assert all(len(c.tool_calls) <= 1 for c in cuts), "the read_file after the cut is dropped"
    kept = [c.tool_calls[0].arguments for c in cuts if c.tool_calls]
    assert len(kept) == 39 and all(whole.startswith(a) and a != whole for a in kept)
    assert len({len(a) for a in kept}) == 39, "every limit cuts at a new place"


def test_characters_beyond_ascii_count_one_each_in_a_reply_and_in_a_prompt() -> None:
    """``é`` costs what ``e`` costs: in a scripted call's arguments (the reply fits the same
    ``max_tokens``) and in a prompt's tool-call arguments, even when a client escaped them."""
    accented, plain = "é" * 350, "e" * 350
    scripted = [
        reply(None, tool_call("write_file", path="a", content=text)) for text in (accented, plain)
    ]
    manners = LlamaManners(count_prompt_tokens=True)
    with FakeServer(Script(scripted + [reply("ok")] * 3), manners=manners) as server:
        fits = [_plain(server, {"max_tokens": 110})["choices"][0] for _ in scripted]
        sent = fits[0]["message"]["tool_calls"][0]["function"]["arguments"]
        counted = []
        for arguments in (sent, json.dumps(json.loads(sent)), sent.replace("é", "e")):
            call = {"id": "c1", "type": "function"}
            call["function"] = {"name": "write_file", "arguments": arguments}
            history = [
                *USER,
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "wrote it"},
            ]
            body = _plain(server, {"messages": history})
            counted.append(body["usage"]["prompt_tokens"])
    assert [choice["finish_reason"] for choice in fits] == ["tool_calls", "tool_calls"]
    assert "é" * 350 in sent, "sent as characters, as llama.cpp sends them"
    assert "\\u00e9" in json.dumps(json.loads(sent)), "the second history escapes them"
    assert counted[0] == counted[1] == counted[2]
