"""A long life: does a turn cost more as the history grows?

Run: ``python benchmarks/long_chat.py [--turns 300] [--messages 2000]``.

Two figures, each against a baseline measured in the same run:

1. A chat of ``--turns`` turns (a ``write_file`` turn, a ``bash`` turn and a text-only turn
   in turn), in-process on a ``ScriptedModel``. Each turn's harness time is its wall time
   less the time inside the model's calls (a real request carries the whole history; that
   part is the model's, not Tilth's). The baseline is the median of the first 50 turns;
   the figure is the median of the last 50.
2. One thread read after one append (what a turn does four times per model call), on a
   thread of ``--messages`` messages, against parsing that whole thread file, which is
   what every read did before the reads were kept (``tilth.session.thread_cache``).

Goals: the last 50 turns' harness median ≤ 2x the first 50's; a read after an append at
least 5x faster than a full parse. Not run by the test suite.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tilth.chat import ChatEngine
from tilth.config import load_settings
from tilth.model import Script, ScriptedModel, reply, tool_call
from tilth.model.base import AssistantTurn
from tilth.session.records import read_line_records
from tilth.session.threads import Thread

GROWTH_GOAL = 2.0
READ_GOAL = 5.0
WINDOW = 50


def answer(model: str, request: dict[str, Any]) -> Any:
    messages = request.get("messages") or []
    if messages[-1].get("role") == "tool":
        return reply("Done.")
    k = sum(1 for m in messages if m.get("role") == "user")
    if k % 3 == 1:
        return reply("Writing.", tool_call("write_file", path=f"out{k % 7}.py", content=f"{k}\n"))
    if k % 3 == 2:
        return reply(None, tool_call("bash", command=f"echo {k} >> log.txt"))
    return reply(f"Turn {k}: nothing to do.")


class TimedModel:
    """A model whose calls are timed (their total is the model's share of a turn)."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.spent = 0.0

    @property
    def name(self) -> str:
        return self.inner.name

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **options: Any
    ) -> AssistantTurn:
        start = time.perf_counter()
        try:
            return self.inner.complete(messages, tools, **options)
        finally:
            self.spent += time.perf_counter() - start


def chat_turns(root: Path, turns: int) -> list[float]:
    """Each turn's harness time (wall time less the model's), in order."""
    work = root / "work"
    work.mkdir(parents=True)
    for n in range(50):
        (work / f"f{n}.txt").write_text("x" * 200)
    settings = load_settings({"TILTH_HOME": str(root / "home"), "TILTH_SANDBOX": "off"})
    model = TimedModel(ScriptedModel(Script(answer), name="scripted-worker"))
    engine = ChatEngine.start(settings, work, model, index_in_background=False)
    out = []
    try:
        for n in range(turns):
            before, start = model.spent, time.perf_counter()
            engine.send(f"prompt {n}")
            out.append(time.perf_counter() - start - (model.spent - before))
    finally:
        engine.close()
    return out


def thread_reads(root: Path, messages: int, rounds: int = 20) -> tuple[float, float]:
    """Median seconds of (a read after one append, a full parse) on a ``messages`` thread."""
    thread = Thread(root / "threads", "worker.T-001.implementing")
    for n in range(messages):
        role = "assistant" if n % 2 else "user"
        thread.append({"role": role, "content": f"message {n} " + "x" * 400})
    thread.messages()
    kept, full = [], []
    for n in range(rounds):
        thread.append({"role": "user", "content": f"one more {n}"})
        start = time.perf_counter()
        thread.messages()
        kept.append(time.perf_counter() - start)
        start = time.perf_counter()
        read_line_records(thread.path, thread.line_problem)
        full.append(time.perf_counter() - start)
    return statistics.median(kept), statistics.median(full)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    env = os.environ
    parser.add_argument("--turns", type=int, default=int(env.get("TILTH_BENCH_TURNS", 300)))
    parser.add_argument("--messages", type=int, default=int(env.get("TILTH_BENCH_MESSAGES", 2000)))
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="tilth-bench-long-"))
    try:
        harness = chat_turns(root / "chat", max(args.turns, 2 * WINDOW))
        kept, full = thread_reads(root / "thread", args.messages)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    first = statistics.median(harness[:WINDOW]) * 1000
    last = statistics.median(harness[-WINDOW:]) * 1000
    growth = last / first
    print(f"chat of {len(harness)} turns, harness time a turn (model's time left out):")
    print(f"  first {WINDOW} turns: median {first:.1f} ms (baseline)")
    print(f"  last {WINDOW} turns:  median {last:.1f} ms ({growth:.2f}x)")
    speedup = full / kept
    print(f"thread of {args.messages} messages, one read after one append:")
    print(f"  kept (thread_cache): median {kept * 1000:.2f} ms")
    print(f"  whole file parsed:   median {full * 1000:.2f} ms (baseline; {speedup:.1f}x slower)")
    grows_ok, reads_ok = growth <= GROWTH_GOAL, speedup >= READ_GOAL
    print(f"goal: last/first <= {GROWTH_GOAL:.0f}x: {'met' if grows_ok else 'MISSED'}")
    print(f"goal: kept read >= {READ_GOAL:.0f}x faster: {'met' if reads_ok else 'MISSED'}")
    return 0 if grows_ok and reads_ok else 1


if __name__ == "__main__":
    sys.exit(main())
