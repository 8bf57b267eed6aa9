"""Worker turns against the real llama.cpp server: harness overhead and prompt growth.

Run: ``python benchmarks/live_turns.py [--turns 10] [--reply-tokens 32]`` after
``make live-deps``; without the cached server it says so and exits 0.

1. **Harness overhead per worker turn.** ``tilth run`` drives a seeded one-task session with
   the real model as worker, through a recording pass-through (``tests/live/proxy.py``).
   A turn's wall time is the time from one worker request to the next; the server's own
   time for the first (llama.cpp's ``timings``: prompt + generation) is taken off, leaving
   the harness's share: reading the stream, dispatching tools, recording the turn. The
   baseline, in the same run, is a bare ``openai`` SDK loop (the SDK comes with the ``test``
   extra; Tilth itself no longer uses it) that sends the very same requests to the same
   server through the same pass-through and dispatches each reply's tool calls through a
   ``ToolBox``. Goal: Tilth's median ≤ 30 ms over the baseline's.
2. **Prompt tokens per worker turn of the demo story.** The scripted demo story (``tilth
   demo``'s first run) is played against the fake server; every worker request it makes is
   rendered by the real server's chat template and counted by its tokenizer
   (``/apply-template``, ``/tokenize``), and printed turn by turn, so growth shows.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
GOAL_MS = 30.0


def _live(name: str) -> Any:
    """A module of the live tier (imported by name: the tier lives with the tests)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(name)


def _same_thread(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """True when ``after`` continues ``before``'s thread (one worker turn later)."""
    first, second = before.get("messages") or [], after.get("messages") or []
    return bool(first) and len(second) > len(first) and second[0] == first[0]


def _is_worker(body: Any) -> bool:
    names = {t["function"]["name"] for t in (body or {}).get("tools") or []}
    return bool(names) and "submit_verdict" not in names


def overheads(exchanges: list[Any]) -> list[float]:
    """Per turn: ms from one request to the next of the same thread, less the server's time."""
    found = []
    for one, two in itertools.pairwise(exchanges):
        server = one.server_ms()
        if server is None or one.status != 200 or not _same_thread(one.body, two.body):
            continue
        found.append((two.started - one.started) * 1000 - server)
    return found


def tilth_turns(root: Path, base_url: str, turns: int, reply_tokens: int) -> None:
    """``tilth run`` on a seeded one-task session, its worker at ``base_url``."""
    import subprocess

    support = _live("tests.agent.support")
    conftest = _live("tests.conftest")
    source = conftest.make_repo(root / "source", support.PACKAGE)
    support.seed_session(root / "home" / "sessions", source, support.TASKS[:1])
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILTH_")}
    env.update(conftest.GIT_IDENTITY)
    env.update(
        TILTH_HOME=str(root / "home"),
        TILTH_BASE_URL=base_url,
        TILTH_API_KEY="live-key",
        TILTH_WORKER_MODEL="gemma3-270m",
        TILTH_EVALUATOR_MODEL="gemma3-270m",
        TILTH_MAX_REPLY_TOKENS=str(reply_tokens),
        TILTH_MAX_ITERATIONS_PER_TASK=str(turns),
        TILTH_MAX_WALL_CLOCK_MINUTES="20",
        TILTH_MODEL_MAX_RETRIES="0",
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
    )
    subprocess.run(
        [sys.executable, "-m", "tilth", "run", str(source)],
        env=env,
        cwd=root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )


def bare_turns(root: Path, base_url: str, bodies: list[dict[str, Any]]) -> None:
    """The same requests from a bare ``openai`` loop, each reply's tool calls dispatched."""
    import openai

    from tilth.tools import ToolBox

    work = root / "bare"
    shutil.copytree(root / "source", work, ignore=shutil.ignore_patterns(".git"))
    box = ToolBox(work)
    client = openai.OpenAI(base_url=base_url, api_key="live-key", max_retries=0, timeout=600)
    for body in bodies:
        options = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        stream = client.chat.completions.create(
            **options, stream=True, stream_options={"include_usage": True}
        )
        calls: dict[int, dict[str, str]] = {}
        for chunk in stream:
            for choice in chunk.choices or []:
                for delta in choice.delta.tool_calls or []:
                    call = calls.setdefault(delta.index, {"name": "", "arguments": ""})
                    if delta.function is not None:
                        call["name"] += delta.function.name or ""
                        call["arguments"] += delta.function.arguments or ""
        for call in calls.values():
            box.dispatch(call["name"], call["arguments"])


def demo_worker_requests(root: Path) -> list[dict[str, Any]]:
    """Every worker request of the scripted demo story's first run, in order."""
    from tilth.demo.script import WORKER
    from tilth.demo.tour import DemoOptions, Tour

    class Quiet:
        def __getattr__(self, name: str) -> Any:
            return lambda *args, **kwargs: None

    tour = Tour(cast(Any, Quiet()), DemoOptions(home=root / "demo-home"), root / "demo")
    (root / "demo").mkdir()
    with _silenced():
        tour.run()
    assert tour.server is not None
    bodies = [r["body"] for r in tour.server.requests if r["path"].endswith("/completions")]
    return [b for b in bodies if b.get("model") == WORKER]


@contextlib.contextmanager
def _silenced() -> Iterator[None]:
    """File descriptors 1 and 2 to /dev/null (the demo's steps are child processes)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def prompt_tokens(root_url: str, body: dict[str, Any]) -> int:
    """The tokens the server would read for ``body``: its template rendered, then tokenized."""
    rendered = _post(
        root_url + "/apply-template", {"messages": body["messages"], "tools": body.get("tools")}
    )
    tokens = _post(root_url + "/tokenize", {"content": rendered["prompt"], "add_special": True})
    return len(tokens["tokens"])


def _post(url: str, payload: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        url, json.dumps(payload).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as answer:
        return json.loads(answer.read())


def _row(name: str, values: list[float]) -> str:
    if not values:
        return f"{name:<28} no turns measured"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return (
        f"{name:<28} median {statistics.median(values):7.2f} ms   p95 {p95:7.2f} ms   "
        f"n={len(values)}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--reply-tokens", type=int, default=32)
    args = parser.parse_args()
    deps = _live("tests.live.deps")
    missing = deps.missing()
    if missing is not None:
        print(f"skipped: {missing}; `make live-deps` puts the server and model in the cache")
        return 0
    server_module = _live("tests.live.server")
    proxy_module = _live("tests.live.proxy")
    root = Path(tempfile.mkdtemp(prefix="tilth-bench-live-"))
    try:
        with server_module.LlamaServer(root / "llama", context=16384) as server:
            threads = server_module.threads()
            print(f"server: {deps.server_kind()} ({server.model}), {threads} thread(s)")
            with proxy_module.RecordingProxy(server.port) as relay:
                tilth_turns(root, relay.base_url, args.turns, args.reply_tokens)
                worker = [e for e in relay.recording.completions() if _is_worker(e.body)]
            with proxy_module.RecordingProxy(server.port) as relay:
                bare_turns(root, relay.base_url, [e.body for e in worker])
                bare = relay.recording.completions()
            demo = demo_worker_requests(root)
            counts = [prompt_tokens(server.root_url, body) for body in demo]
    finally:
        shutil.rmtree(root, ignore_errors=True)

    harness, baseline = overheads(worker), overheads(bare)
    print(_row("bare openai loop (baseline)", baseline))
    print(_row("tilth worker turn", harness))
    verdict = 0
    if harness and baseline:
        extra = statistics.median(harness) - statistics.median(baseline)
        within = extra <= GOAL_MS
        print(f"harness overhead: median {extra:+.2f} ms over the baseline", end="")
        print(f" ({'within' if within else 'OVER'} the {GOAL_MS:.0f} ms goal)")
        verdict = 0 if within else 1
    else:
        print("too few worker turns in one thread to measure (the model ended them early)")
    print(f"demo story, prompt tokens per worker turn ({len(counts)} turns; a stage starts a")
    print("new thread, so the count falls back at each stage's first turn):")
    for number, count in enumerate(counts, start=1):
        grew = f"  ({count - counts[number - 2]:+,})" if number > 1 else ""
        print(f"  turn {number:>2}: {count:>7,}{grew}")
    return verdict


if __name__ == "__main__":
    sys.exit(main())
