"""The fake server speaks Chat Completions well enough for the real openai SDK, streaming too."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import openai
import pytest

from tilth.config import Endpoint
from tilth.model import FakeServer, OpenAIModel, Script, reply, tool_call


def _client(server: FakeServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=10)


def _http(url: str, body: bytes | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_streaming_with_the_sdk_reassembles_text_and_tool_calls() -> None:
    long_text = "a fairly long answer that spans several stream chunks"
    script = Script(
        [
            reply(
                long_text,
                tool_call("write_file", path="src/app.py", content="print('hi')\n" * 3),
                tool_call("run", command="pytest -q"),
                prompt_tokens=70,
                completion_tokens=30,
            )
        ]
    )
    with FakeServer(script) as server:
        stream = _client(server).chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "go"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        text, calls, finish, usage, roles = "", {}, None, None, []
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                delta = choice.delta
                if delta.role:
                    roles.append(delta.role)
                text += delta.content or ""
                for piece in delta.tool_calls or []:
                    call = calls.setdefault(piece.index, {"id": None, "name": "", "arguments": ""})
                    call["id"] = piece.id or call["id"]
                    if piece.function is not None:
                        call["name"] += piece.function.name or ""
                        call["arguments"] += piece.function.arguments or ""
                finish = choice.finish_reason or finish
    assert roles == ["assistant"]
    assert text == long_text
    assert [calls[i]["name"] for i in sorted(calls)] == ["write_file", "run"]
    assert [calls[i]["id"] for i in sorted(calls)] == ["call_1", "call_2"]
    assert json.loads(calls[0]["arguments"]) == {
        "path": "src/app.py",
        "content": "print('hi')\n" * 3,
    }
    assert json.loads(calls[1]["arguments"]) == {"command": "pytest -q"}
    assert finish == "tool_calls"
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (70, 30)


def test_streaming_without_include_usage_sends_no_usage() -> None:
    with FakeServer(Script([reply("short")])) as server:
        chunks = list(
            _client(server).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "go"}], stream=True
            )
        )
    assert all(chunk.usage is None for chunk in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "short"


def test_routes_with_and_without_v1_prefix_and_models_listing() -> None:
    script = Script({"alpha": [reply("from alpha")], "*": [reply("from fallback")]})
    with FakeServer(script) as server:
        root = server.base_url.removesuffix("/v1")
        body = json.dumps({"model": "alpha", "messages": []}).encode()
        status, answer = _http(f"{root}/chat/completions", body)
        assert status == 200
        assert answer["choices"][0]["message"]["content"] == "from alpha"
        status, answer = _http(f"{root}/v1/chat/completions", body)
        assert answer["choices"][0]["message"]["content"] == "from fallback"
        status, listing = _http(f"{server.base_url}/models")
        assert status == 200 and [m["id"] for m in listing["data"]] == ["alpha"]
        assert [m.id for m in _client(server).models.list()] == ["alpha"]
        status, answer = _http(f"{root}/v1/embeddings", body)
        assert status == 404 and "no route" in answer["error"]["message"]
        status, answer = _http(f"{root}/v1/chat/completions", b"{not json")
        assert status == 400
    paths = [request["path"] for request in server.requests]
    assert paths[:2] == ["/chat/completions", "/v1/chat/completions"]
    assert len(paths) == 4, "every POST is recorded, failed ones too"
    assert [probe["path"] for probe in server.probes] == ["/v1/models", "/v1/models"]


def test_requests_are_recorded_from_concurrent_callers() -> None:
    count = 20
    script = Script(lambda model, request: reply(f"echo {request['messages'][0]['content']}"))
    with FakeServer(script) as server:
        model = OpenAIModel(
            Endpoint(role="worker", base_url=server.base_url, api_key="k", model="m"),
            max_retries=0,
        )
        answers: list[str | None] = []

        def ask(n: int) -> None:
            answers.append(model.complete([{"role": "user", "content": str(n)}], []).content)

        threads = [threading.Thread(target=ask, args=(n,)) for n in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    assert sorted(answers, key=str) == sorted((f"echo {n}" for n in range(count)), key=str)
    assert sorted(r["body"]["messages"][0]["content"] for r in server.requests) == sorted(
        str(n) for n in range(count)
    )


def test_runs_as_a_module_and_prints_its_base_url(tmp_path: Path) -> None:
    script_file = tmp_path / "script.json"
    script_file.write_text(Script([reply("from a subprocess")]).to_json())
    process = subprocess.Popen(
        [sys.executable, "-m", "tilth.model.fake_server", "--script", str(script_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        assert process.stderr is not None
        assert f"TILTH_BASE_URL={base_url}" in process.stderr.readline()
        endpoint = Endpoint(role="worker", base_url=base_url, api_key="k", model="any")
        turn = OpenAIModel(endpoint, max_retries=0, timeout_seconds=10).complete([], [])
        assert turn.content == "from a subprocess"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_module_reports_a_bad_script_in_one_line(tmp_path: Path) -> None:
    script_file = tmp_path / "script.json"
    script_file.write_text('[{"type": "error", "status": 200}]')
    result = subprocess.run(
        [sys.executable, "-m", "tilth.model.fake_server", "--script", str(script_file)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: script {script_file}: script[0]: error status")
    assert "Traceback" not in result.stderr


def test_module_names_a_mistyped_key_in_one_line(tmp_path: Path) -> None:
    script_file = tmp_path / "script.json"
    script_file.write_text('{"worker": [{"contnt": "hello"}]}')
    result = subprocess.run(
        [sys.executable, "-m", "tilth.model.fake_server", "--script", str(script_file)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(
        f"error: script {script_file}: script['worker'][0]: unknown key 'contnt' in a reply "
        "(did you mean 'content'?"
    )


def test_a_json_reply_without_usage_reports_the_reply_helpers_default() -> None:
    script = Script({"worker": [{"content": "json"}], "helper": [reply("helper")]})
    with FakeServer(script) as server:
        counts = []
        for model in ("worker", "helper"):
            body = json.dumps({"model": model, "messages": []}).encode()
            status, answer = _http(f"{server.base_url}/chat/completions", body)
            assert status == 200
            counts.append(answer["usage"])
    assert (
        counts[0] == counts[1] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    )


@pytest.mark.parametrize("use_context_manager", [True, False])
def test_start_and_stop_release_the_port(use_context_manager: bool) -> None:
    server = FakeServer(Script([]))
    if use_context_manager:
        with server:
            url = server.base_url
    else:
        server.start()
        url = server.base_url
        server.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{url}/models", timeout=5)


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_module_refuses_a_port_that_cannot_be_one(tmp_path: Path, port: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tilth.model.fake_server", "--script", "s.json", "--port", port],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert f"'{port}' is not a port number (0-65535" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_client_that_goes_away_mid_answer_is_counted_not_printed(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A ``/models`` answer far larger than the socket buffers, and a client that resets the
    connection without reading it: the server's write fails, quietly."""
    import socket
    import struct
    import time

    names = {f"model-{n:06d}-" + "x" * 60: [] for n in range(100_000)}  # ~10 MB to list
    with FakeServer(Script(names)) as server:  # type: ignore[arg-type]
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.connect(("127.0.0.1", server.port))
        client.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        while not server.probes:
            time.sleep(0.01)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # a reset, not a goodbye
        give_up = time.monotonic() + 60
        while server.abandoned == 0 and time.monotonic() < give_up:
            time.sleep(0.02)
        assert server.abandoned == 1
        status, listed = _http(server.base_url + "/models")
    assert status == 200 and len(listed["data"]) == 100_000, "the server serves on"
    assert "Traceback" not in capfd.readouterr().err
