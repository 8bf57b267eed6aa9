"""How Tilth reads what servers say about context windows, as each server says it."""

from __future__ import annotations

from tilth.model.endpoint_facts import facts_from_props, server_root, window_from_models
from tilth.model.openai_client import context_overflow


def test_each_servers_context_refusal_is_recognised() -> None:
    llama = {
        "code": 400,
        "message": "request (8268 tokens) exceeds the available context size (8192 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 8268,
        "n_ctx": 8192,
    }
    assert context_overflow(400, llama, "HTTP 400: " + llama["message"]) == (8268, 8192)
    worded = "HTTP 400: request (9000 tokens) exceeds the available context size (4096 tokens)"
    assert context_overflow(400, {"message": "x"}, worded) == (9000, 4096)
    vllm = (
        "HTTP 400: This model's maximum context length is 4096 tokens. However, you requested "
        "5000 tokens in the messages. Please reduce the length of the messages."
    )
    assert context_overflow(400, {"message": vllm}, vllm) == (None, None)
    openai = {"code": "context_length_exceeded", "message": "too long"}
    assert context_overflow(400, openai, "HTTP 400: too long") == (None, None)
    assert (
        context_overflow(400, {"message": "bad tool schema"}, "HTTP 400: bad tool schema") is None
    )
    assert context_overflow(500, llama, llama["message"]) is None, "a 500 is no refusal"


def test_the_window_is_read_from_props_or_models_metadata() -> None:
    props = {"default_generation_settings": {"n_ctx": 6000}, "chat_template_caps": {}}
    assert facts_from_props(props) == (6000, None)
    assert facts_from_props({"n_ctx": 2048, "chat_template_caps": {"supports_tools": False}}) == (
        2048,
        False,
    )
    assert facts_from_props("not json") == (None, None)
    openrouter = {"data": [{"id": "a/b", "context_length": 131072}]}
    assert window_from_models(openrouter, "a/b") == (131072, "/models context_length")
    vllm = {"data": [{"id": "qwen", "max_model_len": 32768}]}
    assert window_from_models(vllm, "qwen") == (32768, "/models max_model_len")
    assert window_from_models(vllm, "other") == (None, None)
    assert server_root("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080"


def test_every_request_carries_max_tokens() -> None:
    from tilth.config import Endpoint
    from tilth.model import FakeServer, OpenAIModel, Script, reply

    with FakeServer(Script([reply("a"), reply("b")])) as server:
        endpoint = Endpoint("worker", server.base_url, "k", "m")
        OpenAIModel(endpoint).complete([{"role": "user", "content": "hi"}], [])
        OpenAIModel(endpoint, max_reply_tokens=300).complete([{"role": "user", "content": "x"}], [])
        sent = [r["body"]["max_tokens"] for r in server.requests]
    assert sent == [8192, 300]
