"""``tilth chat`` against the real llama.cpp server: real tool calls, cut-off replies, retries.

The model is weak and nondeterministic, so these tests assert what Tilth guarantees — the
chat goes on, every request is one the server takes, the person is told — never what the
model writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pexpect
import pytest

from tests.live.proxy import RecordingProxy
from tests.live.server import LlamaServer, free_port
from tests.live.support import (
    CONTEXT_REFUSED,
    check_requests,
    last_user_text,
    live_env,
    project,
    sent_tool_calls,
    tilth,
)
from tests.sessionview import SessionView

pytestmark = pytest.mark.timeout(900)

REPLY_TOKENS = 32
"""Short replies: fast, and the model's tool calls are often cut off mid-arguments. (The model
goes on calling tools after every result, so a chat turn runs to Tilth's 40 model calls: the
fewer tokens each, the sooner.)"""
WRITE = "Write a file hello.py that prints hello."
ASK = "What does this package do?"


def test_chat_goes_on_after_a_cut_off_call(proxy: RecordingProxy, tmp_path: Path) -> None:
    work = project(tmp_path)
    env = live_env(tmp_path / "home", proxy.base_url, REPLY_TOKENS)
    result = tilth(["chat", str(work)], env, tmp_path, stdin=f"{WRITE}\n{ASK}\n")

    assert result.returncode == 0, result.stderr
    exchanges = check_requests(proxy, REPLY_TOKENS)
    # Real tool calls went back and forth, and at least one reply was cut off by max_tokens.
    assert sent_tool_calls(exchanges), "the model made no tool call the chat sent back"
    assert any("length" in e.finish_reasons() for e in exchanges)
    assert "reply-length limit" in result.stdout + result.stderr, result.stdout[-2000:]
    # The chat went on: the last prompt reached the server and was answered.
    last = [e for e in exchanges if last_user_text(e) == ASK]
    assert last and last[0].status == 200, [e.status for e in exchanges]
    turns = SessionView.only(tmp_path / "home" / "sessions").payloads("model_call")
    assert turns, "no model_call was logged"


def test_each_retry_shows_a_line_in_the_terminal_chat(tmp_path: Path) -> None:
    """The server is down when the chat asks, and comes up while Tilth retries."""
    work = project(tmp_path)
    port = free_port()
    env = live_env(
        tmp_path / "home",
        f"http://127.0.0.1:{port}/v1",
        REPLY_TOKENS,
        TILTH_MODEL_MAX_RETRIES="8",
        TILTH_MODEL_BACKOFF_SECONDS="1",
        TERM="xterm-256color",
    )
    chat = pexpect.spawn(
        sys.executable,
        ["-m", "tilth", "chat", str(work)],
        env=env,
        cwd=str(tmp_path),
        dimensions=(50, 160),
        encoding="utf-8",
        timeout=60,
    )
    chat.logfile_read = (tmp_path / "screen.log").open("w")
    try:
        chat.expect_exact("›")
        chat.send(ASK + "\r")
        chat.expect(r"retry", timeout=60)
        with LlamaServer(tmp_path / "llama", context=8192, port=port):
            chat.expect(r"→|reply-length limit|── turn 1", timeout=600)  # an answer came
            chat.send("\x03")  # cancel the rest of the turn
            chat.expect_exact("›", timeout=120)
            chat.send("\x04")
            chat.expect(pexpect.EOF, timeout=60)
    finally:
        if chat.isalive():
            chat.terminate(force=True)
        chat.logfile_read.close()
    screen = (tmp_path / "screen.log").read_text()
    retries = SessionView.only(tmp_path / "home" / "sessions").payloads("model_retry")
    assert retries, "no model_retry was logged"
    shown = [line for line in screen.splitlines() if "retry" in line.lower()]
    assert len(shown) >= len(retries), (retries, shown)


def test_a_thread_past_a_small_context_is_summarized_and_goes_on(
    llama_small: LlamaServer,
    tmp_path: Path,
) -> None:
    """At ``-c 2048`` the first turn's tool calls and results overflow the window: Tilth
    summarizes and goes on (Tilth's instructions and tools leave a few hundred tokens free)."""
    work = project(tmp_path)
    with RecordingProxy(llama_small.port) as relay:
        env = live_env(tmp_path / "home", relay.base_url, REPLY_TOKENS)
        result = tilth(["chat", str(work)], env, tmp_path, stdin=f"{WRITE}\n{ASK}\n")
        exchanges = check_requests(relay, REPLY_TOKENS)
    assert result.returncode == 0, result.stderr
    refused = [e for e in exchanges if CONTEXT_REFUSED in e.answer_text()]
    assert len(refused) <= 1, f"{len(refused)} requests refused for their size"
    last = [e for e in exchanges if last_user_text(e) == ASK]
    assert last and any(e.status == 200 for e in last), [e.status for e in exchanges]
    assert "summar" in (result.stdout + result.stderr).lower(), result.stdout[-2000:]
    view = SessionView.only(tmp_path / "home" / "sessions")
    compacted = view.payloads("context_compacted")
    calls = [p for p in view.payloads("model_call") if p.get("actor") == "chat"]
    assert compacted and len(compacted) <= len(calls) // 3, "a summary buys several steps"


def test_a_first_message_that_nearly_fills_a_small_context_is_said_once(
    llama_small: LlamaServer,
    tmp_path: Path,
) -> None:
    """At ``-c 2048`` a long first message leaves a few steps' room: the chat summarized before
    every other request; now it says once that the window is too small, and stops the turn."""
    work = project(tmp_path)
    paragraph = " ".join(
        f"Line {n} of the notes says the greeting must stay short." for n in range(30)
    )
    with RecordingProxy(llama_small.port) as relay:
        env = live_env(tmp_path / "home", relay.base_url, REPLY_TOKENS)
        prompt = f"Keep these notes in mind: {paragraph}\n"
        result = tilth(["chat", str(work)], env, tmp_path, stdin=prompt)
        exchanges = check_requests(relay, REPLY_TOKENS)
    assert result.returncode == 0, result.stderr
    assert not [e for e in exchanges if CONTEXT_REFUSED in e.answer_text()]
    assert result.stderr.count("context window (2,048 tokens) is too small") == 1, result.stderr
    view = SessionView.only(tmp_path / "home" / "sessions")
    assert view.payloads("context_compacted") == []
    assert view.payloads("context_too_small")
