"""``tilth run`` against a server with llama.cpp's manners (SPEC §12, issue 23's "done when").

The fake server refuses a history holding tool-call arguments that are not JSON (HTTP 500,
as llama-server does), has a 6,000-token context (HTTP 400 beyond it) and counts prompt
tokens from the request's size. The worker's first reply is cut off mid-arguments with
``finish_reason: length``; its next turns print long listings.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from agent.support import TASKS, model_env, recipes, seed_session, tilth, worker_requests
from tilth.demo.script import Team
from tilth.model import FakeServer, Script, reply, tool_call, tool_call_raw
from tilth.model.fake_replies import context_refusal, invalid_arguments
from tilth.model.fake_server import LlamaManners
from tilth.model.script import Reply
from tilth.timeline.rewind.summarize import SUMMARY_PROMPT

N_CTX = 6_000
LISTING = "seq -f 'line %05g of a long listing' 1 400"
CUT = '{"plan": "1. write textkit/words.py\\n2. run the'


class Story:
    """The team, plus a cut-off first reply, long listings and a summarizer."""

    def __init__(self, listings: int = 3) -> None:
        self.team = Team(recipes())
        self.listings = listings
        self.cut = False
        self.lock = threading.Lock()

    def __call__(self, model: str, request: dict[str, Any]) -> Reply:
        messages = request.get("messages") or []
        tools = {t["function"]["name"] for t in request.get("tools") or []}
        if messages and messages[0].get("content") == SUMMARY_PROMPT:
            return reply("(scripted summary) The worker listed files; nothing changed yet.")
        with self.lock:
            if "submit_plan" in tools and not self.cut:
                self.cut = True
                return reply(None, tool_call_raw("submit_plan", CUT), finish_reason="length")
            if "submit_case" in tools and self.listings:
                self.listings -= 1
                return reply(None, tool_call("bash", command=LISTING))
        return self.team(model, request)


def manners() -> LlamaManners:
    return LlamaManners(
        refuse_invalid_arguments=True, n_ctx=N_CTX, supports_tools=True, count_prompt_tokens=True
    )


def test_a_run_on_a_llama_like_server_ends_all_done(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    with FakeServer(Script(Story()), manners=manners()) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url))
        bodies = [r["body"] for r in server.requests]
        checkpoints = tilth("checkpoints", seeded.session.id, "--json")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert seeded.session.status == "all_done"

    assert bodies and all(body.get("max_tokens") == 8192 for body in bodies), "max_tokens always"
    assert [b for b in bodies if invalid_arguments(b)] == [], "no request refused for arguments"
    refused = [b for b in bodies if context_refusal(b, N_CTX)]
    assert len(refused) <= 1, "at most one request refused for its size"

    # The person was told, and so was the model (its cut-off call answered as cut off).
    assert "the reply hit the reply-length limit (8,192 tokens)" in output
    second = worker_requests(server)[1]["messages"]
    kept = second[-2]["tool_calls"][0]["function"]["arguments"]
    assert kept == "{}", "the cut-off call is kept as valid JSON"
    answer = second[-1]
    assert answer["role"] == "tool" and "was cut off and not run" in answer["content"]
    assert "reply-length limit" in answer["content"]
    assert "badly escaped" not in json.dumps(second)
    assert seeded.events("reply_cut_off")[0].payload["finish_reason"] == "length"

    # The long listings were summarized, after a checkpoint that undoes it.
    compacted = seeded.events("context_compacted")
    assert compacted, output
    summaries = [e.payload for e in seeded.events("summarize") if e.payload.get("automatic")]
    assert summaries and summaries[0]["checkpoint"] == compacted[0].payload["checkpoint"]
    listed = {cp["id"]: cp for cp in json.loads(checkpoints.stdout)}
    before = listed[compacted[0].payload["checkpoint"]]
    assert before["label"].startswith("before summarizing")
    assert "oldest" in output and "summarized" in output
    assert "cannot take tool calls" not in output


def test_a_run_on_a_server_that_takes_no_tools_says_so_first(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    deaf = LlamaManners(n_ctx=N_CTX, supports_tools=False)
    with FakeServer(Script(Story(listings=0)), manners=deaf) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr.count("cannot take tool calls") == 1, "once for a server both roles use"
    assert "--chat-template-file" in result.stderr
    assert seeded.session.status == "all_done"


def test_a_context_refusal_is_summarized_and_retried_once(repo: Path, sessions_dir: Path) -> None:
    """A server that never says its window refuses a long request; Tilth summarizes, retries."""
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    silent = LlamaManners(n_ctx=N_CTX, count_prompt_tokens=True, props=False)
    with FakeServer(Script(Story(listings=4)), manners=silent) as server:
        env = model_env(server.base_url, TILTH_CONTEXT_TOKENS="100000")
        result = tilth("run", str(repo), env=env)
        bodies = [r["body"] for r in server.requests]
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert seeded.session.status == "all_done"
    refused = [i for i, body in enumerate(bodies) if context_refusal(body, N_CTX)]
    assert refused, "the long listings passed the server's window"
    assert all(not context_refusal(bodies[i + 1], N_CTX) for i in refused), "retried once, fitting"
    reasons = [e.payload["reason"] for e in seeded.events("context_compacted")]
    assert any("refused the request" in reason for reason in reasons), output
    assert "window" in output
