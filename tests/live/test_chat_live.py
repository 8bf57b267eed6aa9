"""``tilth chat`` against the real llama.cpp server: real tool calls, cut-off replies, retries.

The model is weak and nondeterministic, so these tests assert what Tilth guarantees — the
chat goes on, every request is one the server takes, the person is told — never what the
model writes.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
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
SHORT = "Say hello in one word. Do not use any tool."
"""The message after a long turn: only its first request's answer is waited for."""


def test_each_retry_shows_a_line_in_the_terminal_chat(
    llama_small: LlamaServer, tmp_path: Path
) -> None:
    """The server is down when the chat asks, and comes up while Tilth retries: nothing listens
    on the port the chat is given until a retry was shown; then a pass-through to the shared
    server opens there (no second model to load). (The small-window server: the chat tests
    after this one find the chat's instructions and tools in its prompt cache.)"""
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
        with RecordingProxy(llama_small.port, port=port, slots=llama_small.slots):
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


def counts(sessions: Path) -> Counter[str]:
    """How many events of each type the one session under ``sessions`` holds so far."""
    if not sessions.is_dir() or not any(sessions.iterdir()):
        return Counter()
    return Counter(SessionView.only(sessions).types())


def steps_since_a_summary(sessions: Path) -> int:
    """The chat's model calls since its latest summary (0 before the first)."""
    steps = -1
    for event in SessionView.only(sessions).events():
        if event.type == "context_compacted":
            steps = 0
        elif steps >= 0 and event.type == "model_call" and event.payload.get("actor") == "chat":
            steps += 1
    return max(steps, 0)


def answered(relay: RecordingProxy, text: str) -> bool:
    """Whether a request whose last user message is ``text`` was answered to its end."""
    return any(
        last_user_text(e) == text and e.status == 200 and e.ended
        for e in relay.recording.completions()
    )


def test_a_chat_past_a_small_context_with_cut_off_calls_is_summarized_and_goes_on(
    llama_small: LlamaServer,
    tmp_path: Path,
) -> None:
    """In a 2,048-token window (a slot of ``llama_small``) the first turn's tool calls, some
    cut off by the reply limit, and their results overflow the window: Tilth sends every call
    back as valid JSON, tells the person about the cut-off replies, summarizes and goes on
    (Tilth's instructions and tools leave a few hundred tokens free); the next message reaches
    the server and is answered.

    The model goes on calling tools to Tilth's 40-call cap, turn after turn; once a summary
    has bought the first turn three more steps (no summary before each request), Ctrl-C
    (SIGINT, stdin a pipe) cancels it, and once the next message was answered SIGTERM ends the
    chat: the rest would prove nothing more."""
    work = project(tmp_path)
    sessions = tmp_path / "home" / "sessions"
    with RecordingProxy(llama_small.port, slots=llama_small.slots) as relay:
        # The guard against a repeated failing call would end the looping turn before the
        # window overflows: this test is about the summary, so the model may loop.
        env = live_env(
            tmp_path / "home", relay.base_url, REPLY_TOKENS, TILTH_MAX_REPEATED_FAILURES="0"
        )
        with (tmp_path / "out.txt").open("w") as out, (tmp_path / "err.txt").open("w") as err:
            chat = subprocess.Popen(
                [sys.executable, "-m", "tilth", "chat", str(work)],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                env=env,
                cwd=tmp_path,
                text=True,
            )
        try:
            assert chat.stdin is not None
            chat.stdin.write(f"{WRITE}\n{SHORT}\n")
            chat.stdin.close()
            deadline = time.monotonic() + 840
            summarized = False
            while chat.poll() is None and time.monotonic() < deadline:
                seen = counts(sessions)
                if not summarized and seen["user_message"] == 1:
                    summarized = steps_since_a_summary(sessions) >= 3
                    if summarized:
                        chat.send_signal(signal.SIGINT)
                elif answered(relay, SHORT):
                    chat.send_signal(signal.SIGTERM)
                    break
                time.sleep(0.5)
            code = chat.wait(timeout=120)
        finally:
            if chat.poll() is None:
                chat.kill()
                chat.wait()
        exchanges = check_requests(relay, REPLY_TOKENS)
    said = (tmp_path / "out.txt").read_text() + (tmp_path / "err.txt").read_text()
    assert code in (0, 130), said[-3000:]
    assert "Traceback" not in said, said[-3000:]
    # Real tool calls went back and forth, and at least one reply was cut off by max_tokens.
    assert sent_tool_calls(exchanges), "the model made no tool call the chat sent back"
    assert any("length" in e.finish_reasons() for e in exchanges)
    assert "reply-length limit" in said, said[-2000:]
    refused = [e for e in exchanges if CONTEXT_REFUSED in e.answer_text()]
    assert len(refused) <= 1, f"{len(refused)} requests refused for their size"
    # The chat went on: the last prompt reached the server and was answered.
    assert answered(relay, SHORT), [e.status for e in exchanges]
    assert "summar" in said.lower(), said[-2000:]
    view = SessionView.only(sessions)
    compacted = view.payloads("context_compacted")
    calls = [p for p in view.payloads("model_call") if p.get("actor") == "chat"]
    assert compacted and len(compacted) <= len(calls) // 3, "a summary buys several steps"


def test_a_first_message_that_nearly_fills_a_small_context_is_said_once(
    llama_small: LlamaServer,
    tmp_path: Path,
) -> None:
    """In a 2,048-token window a long first message leaves a few steps' room: the chat
    summarized before every other request; now it says once that the window is too small, and
    stops the turn."""
    work = project(tmp_path)
    paragraph = " ".join(
        f"Line {n} of the notes says the greeting must stay short." for n in range(30)
    )
    with RecordingProxy(llama_small.port, slots=llama_small.slots) as relay:
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
