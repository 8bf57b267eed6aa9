"""``tilth chat`` (stdin piped) against a server with llama.cpp's manners (SPEC §12).

A cut-off tool call does not jam the chat (nor a resumed one whose thread holds invalid
arguments); retries, cut-off and repeating replies are told on a line of their own; errors
go to stderr; a chat whose every turn failed is not listed as done.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.chat.tty import chat_env
from tests.sessionview import SessionView
from tests.warm_cli import shared
from tilth.model import FakeServer, Script, error, reply, tool_call, tool_call_raw
from tilth.model.fake_replies import context_refusal, invalid_arguments
from tilth.model.fake_server import LlamaManners
from tilth.timeline.rewind.summarize import SUMMARY_PROMPT

LLAMA = LlamaManners(refuse_invalid_arguments=True, n_ctx=32_768, count_prompt_tokens=True)
CUT = reply(None, tool_call_raw("write_file", '{"path": "a.py", "'), finish_reason="length")


def chat(
    tmp_path: Path,
    lines: list[str],
    server: FakeServer,
    *args: str,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "work").mkdir(exist_ok=True)
    return shared().run(
        ["chat", *(args or ("work",))],
        input_text="".join(line + "\n" for line in lines),
        cwd=tmp_path,
        env=chat_env(tmp_path / "home", server, **env),
        timeout=120,
    )


def only_session(tmp_path: Path) -> SessionView:
    return SessionView.only(tmp_path / "home" / "sessions")


def test_a_cut_off_call_is_told_and_the_chat_goes_on(tmp_path: Path) -> None:
    replies = [CUT, reply("I will write it in two parts."), reply("Still here.")]
    with FakeServer(Script({"worker": replies}), manners=LLAMA) as server:
        result = chat(tmp_path, ["write a.py", "and now?"], server)
        bodies = [r["body"] for r in server.requests]
    assert result.returncode == 0, result.stderr
    assert "note: the reply hit the reply-length limit (8,192 tokens)" in result.stdout
    assert "Still here." in result.stdout and "error" not in result.stderr.lower()
    assert len(bodies) == 3 and not [b for b in bodies if invalid_arguments(b)]
    answered = bodies[1]["messages"][-1]
    assert "was cut off and not run" in answered["content"]
    assert all(b["max_tokens"] == 8192 for b in bodies)


def test_a_resumed_chat_with_invalid_arguments_in_its_thread_is_not_stuck(
    tmp_path: Path,
) -> None:
    with FakeServer(Script({"worker": [reply("Hello.")]}), manners=LLAMA) as server:
        assert chat(tmp_path, ["hi"], server).returncode == 0
    view = only_session(tmp_path)
    # A thread written before the fix: a cut-off call kept with its broken arguments.
    thread = view.session.threads.get("chat")
    broken = {"id": "call_9", "type": "function"}
    broken["function"] = {"name": "write_file", "arguments": '{"path": "a.py", "'}
    thread.append({"role": "assistant", "content": "", "tool_calls": [broken]}, turn=1)
    thread.append({"role": "tool", "tool_call_id": "call_9", "content": "ERROR: bad"}, turn=1)
    with FakeServer(Script({"worker": [reply("Back again.")]}), manners=LLAMA) as server:
        result = chat(tmp_path, ["go on"], server, "--resume", view.session.id)
        bodies = [r["body"] for r in server.requests]
    assert result.returncode == 0, result.stderr
    assert "Back again." in result.stdout
    assert len(bodies) == 1 and invalid_arguments(bodies[0]) is None


def test_each_retry_is_a_line_and_is_logged(tmp_path: Path) -> None:
    replies = [error(503, "overloaded"), reply("Made it.")]
    with FakeServer(Script({"worker": replies})) as server:
        result = chat(
            tmp_path,
            ["hello"],
            server,
            TILTH_MODEL_MAX_RETRIES="2",
            TILTH_MODEL_BACKOFF_SECONDS="0.01",
        )
    assert result.returncode == 0, result.stderr
    assert "note: chat model call failed (HTTP 503: overloaded); retry 1 in" in result.stdout
    retries = only_session(tmp_path).payloads("model_retry")
    assert [(r["actor"], r["attempt"]) for r in retries] == [("chat", 1)]


def test_a_server_error_the_same_request_drew_twice_is_not_retried_again(
    tmp_path: Path,
) -> None:
    failure = error(500, "Failed to parse tool call arguments as JSON")
    with FakeServer(Script({"worker": [failure] * 5})) as server:
        result = chat(
            tmp_path,
            ["hello"],
            server,
            TILTH_MODEL_MAX_RETRIES="4",
            TILTH_MODEL_BACKOFF_SECONDS="0.01",
        )
        asked = len(server.requests)
    assert asked == 2, "one retry, then the same answer again: no more"
    assert "the same request drew the same answer" in result.stderr
    assert "TILTH_BASE_URL" not in result.stdout + result.stderr


def test_a_reply_that_only_repeats_itself_is_cut_short(tmp_path: Path) -> None:
    looping = reply("Let me think.\n" + "I will check the file again.\n" * 3000)
    with FakeServer(Script({"worker": [looping, reply("Fine now.")]})) as server:
        result = chat(tmp_path, ["loop", "again"], server)
    assert result.returncode == 0, result.stderr
    assert "note: the reply only repeated itself; it was cut short" in result.stdout
    view = only_session(tmp_path)
    said = next(m for m in view.thread("chat") if m["role"] == "assistant")["content"]
    assert len(said) < 2_100
    assert view.payloads("reply_cut_off")[0]["finish_reason"] == "repetition"
    assert "Fine now." in result.stdout


def test_a_tool_call_whose_arguments_only_repeat_themselves_is_cut_short(
    tmp_path: Path,
) -> None:
    looping = reply(None, tool_call("write_file", path="a.txt", content="the same line\n" * 3000))
    with FakeServer(Script({"worker": [looping, reply("Fine now.")]})) as server:
        result = chat(tmp_path, ["write it", "again"], server)
        second = server.requests[1]["body"]["messages"]
    assert result.returncode == 0, result.stderr
    assert "note: the reply only repeated itself; it was cut short" in result.stdout
    assert not (tmp_path / "work" / "a.txt").exists(), "the cut call was not run"
    view = only_session(tmp_path)
    assert view.payloads("reply_cut_off")[0]["finish_reason"] == "repetition"
    at = next(i for i, m in enumerate(second) if m["role"] == "assistant")
    said, told = second[at], second[at + 1]
    assert "write_file call, cut short" in said["content"] and not said.get("tool_calls")
    assert told["role"] == "user" and "only repeated the same text" in told["content"]
    assert len(json.dumps(second)) < 12_000, "the repeats are not sent back"
    assert "Fine now." in result.stdout


def test_errors_go_to_stderr_and_an_all_failed_chat_is_not_done(tmp_path: Path) -> None:
    with FakeServer(Script({"worker": [error(400, "bad request")] * 2})) as server:
        result = chat(tmp_path, ["one", "two"], server)
    assert result.returncode == 0
    assert result.stderr.count("error: ") == 2 and "bad request" in result.stderr
    assert "error" not in result.stdout.lower()
    view = only_session(tmp_path)
    assert view.status == "failed"
    assert view.payloads("stop")[-1]["reason"] == "error"
    listed: Any = json.loads(
        shared()
        .run(["sessions", "--json"], cwd=tmp_path, env=chat_env(tmp_path / "home", server))
        .stdout
    )
    assert "all_done" not in json.dumps(listed)


def test_a_window_too_small_for_the_instructions_says_so_once(tmp_path: Path) -> None:
    tiny = LlamaManners(n_ctx=300, count_prompt_tokens=True)
    with FakeServer(Script({"worker": [reply("never")]}), manners=tiny) as server:
        result = chat(tmp_path, ["hello"], server)
        asked = len(server.requests)
    assert asked == 1, "refused once; no summary can make the instructions fit"
    assert result.stderr.count("the model's context window (300 tokens) is too small") == 1
    assert "--ctx-size" in result.stderr
    assert "/summarize" not in result.stderr, "summarizing cannot shorten the instructions"
    assert "tilth resume" not in result.stdout + result.stderr


STRICT = LlamaManners(refuse_invalid_arguments=True, refuse_unanswered_calls=True)


def test_a_made_up_tool_is_answered_shown_and_the_chat_goes_on(tmp_path: Path) -> None:
    replies = [
        reply(None, tool_call_raw("launch_rockets", "{}")),
        reply("Sorry, no such tool."),
        reply("Still here."),
    ]
    with FakeServer(Script({"worker": replies}), manners=STRICT) as server:
        result = chat(tmp_path, ["go", "and now?"], server)
        bodies = [r["body"] for r in server.requests]
    assert result.returncode == 0, result.stderr
    assert "launch_rockets: not run, there is no such tool" in result.stdout
    assert "Still here." in result.stdout
    assert len(bodies) == 3
    answered = bodies[1]["messages"][-1]
    assert answered["role"] == "tool" and "unknown tool 'launch_rockets'" in answered["content"]
    assert "write_file" in answered["content"]  # the tools it does have


def test_unreadable_or_non_object_arguments_are_shown_and_kept_as_an_object(
    tmp_path: Path,
) -> None:
    replies = [
        reply(None, tool_call_raw("write_file", '{"path": "x.py", "content": "unterminated')),
        reply(None, tool_call_raw("bash", "[1, 2]")),
        reply("Done."),
    ]
    with FakeServer(Script({"worker": replies}), manners=STRICT) as server:
        result = chat(tmp_path, ["go"], server)
        bodies = [r["body"] for r in server.requests]
    assert result.returncode == 0, result.stderr
    assert "write_file: not run, its arguments could not be read" in result.stdout
    assert "Done." in result.stdout
    assert len(bodies) == 3 and not [b for b in bodies if invalid_arguments(b)]
    kept = [
        call["function"]["arguments"]
        for message in bodies[2]["messages"]
        for call in message.get("tool_calls") or []
    ]
    assert kept == ["{}", "{}"]
    assert "must be a JSON object" in bodies[2]["messages"][-1]["content"]


def test_a_server_that_takes_no_tools_is_told_before_the_first_turn(tmp_path: Path) -> None:
    manners = LlamaManners(n_ctx=8192, supports_tools=False)
    with FakeServer(Script({"worker": [reply("I cannot see any tools.")]}), manners=manners) as s:
        result = chat(tmp_path, ["read hello.py"], s)
    assert result.returncode == 0, result.stderr
    warning = "cannot take tool calls (/props chat_template_caps.supports_tools is false)"
    assert warning in result.stderr and "--chat-template-file" in result.stderr
    with FakeServer(Script({"worker": [reply("Fine.")]}), manners=LLAMA) as server:
        result = chat(tmp_path, ["hi"], server)
    assert "cannot take tool calls" not in result.stderr + result.stdout


def test_a_window_the_first_message_nearly_fills_gives_one_message_not_a_summary_loop(
    tmp_path: Path,
) -> None:
    """Seen at llama.cpp ``-c 2048``: the instructions, tools and a long first message took
    ~75% of the window, so each summary made room for two steps and the chat summarized
    before every other request, the same estimate each time."""
    notes = " ".join(f"Line {n} of the notes says the greeting must stay short." for n in range(30))

    def story(model: str, request: dict[str, Any]) -> Any:
        messages = request.get("messages") or []
        if messages and messages[0].get("content") == SUMMARY_PROMPT:
            return reply("(summary) The notes were read.")
        return reply(None, tool_call("read_file", path="app.py"))

    window = LlamaManners(n_ctx=2048, supports_tools=True, count_prompt_tokens=True)
    with FakeServer(Script(story), manners=window) as server:
        (tmp_path / "work").mkdir()
        (tmp_path / "work" / "app.py").write_text("def hello():\n    return 'hi'\n")
        result = chat(tmp_path, [f"Keep these notes in mind: {notes}"], server)
        bodies = [r["body"] for r in server.requests]
    summaries = [b for b in bodies if b["messages"][0]["content"] == SUMMARY_PROMPT]
    assert summaries == [], f"{len(summaries)} summaries of a thread no summary can shorten"
    assert result.stderr.count("the model's context window (2,048 tokens) is too small") == 1
    assert "--ctx-size" in result.stderr and "tilth resume" not in result.stderr
    assert not [b for b in bodies if context_refusal(b, 2048)], "stopped before a refusal"
    view = only_session(tmp_path)
    assert view.payloads("context_compacted") == []
    assert [p["window"] for p in view.payloads("context_too_small")] == [2048]
