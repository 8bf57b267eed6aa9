"""Harness overhead per worker turn on a 10,000-file repository, beside a bare-loop baseline.

Run: ``python benchmarks/turn_overhead.py [--files 10000] [--turns 40]``.

The worker is a ``ScriptedModel`` that answers instantly, so everything measured
between two model calls is the harness: events, thread persistence, tool dispatch,
turn capture and checkpoint recording, task state, caps. Each turn writes one file
(alternating with a read) through the real task pipeline (``run_task``). The
baseline, in the same run, is a bare loop that only calls the same model and
dispatches the same tool calls through a ``ToolBox`` — no session, no recording.

Goal: median harness overhead ≤ 30 ms per turn. Not run by the test suite.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "benchmarks"):  # tilth from a checkout; the shared _helpers
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from _helpers import make_repo as shared_repo  # noqa: E402

from tilth import git_worktrees  # noqa: E402
from tilth.agent.pipeline import run_task  # noqa: E402
from tilth.agent.progress_sinks import SilentProgress  # noqa: E402
from tilth.agent.run_context import RunContext  # noqa: E402
from tilth.config import load_settings  # noqa: E402
from tilth.model import Script, ScriptedModel, reply, tool_call  # noqa: E402
from tilth.model.base import AssistantTurn  # noqa: E402
from tilth.session.store import Session  # noqa: E402
from tilth.session.task import Task  # noqa: E402
from tilth.timeline import Recorder  # noqa: E402
from tilth.tools import ToolBox  # noqa: E402

GOAL_MS = 30.0
TASK = {
    "id": "T-001",
    "title": "Benchmark task",
    "description": "Write files until the iteration cap.",
    "acceptance_criteria": ["none"],
    "status": "pending",
}


class TimedModel:
    """Wraps a model and records when each call starts and ends."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.spans: list[tuple[float, float]] = []

    @property
    def name(self) -> str:
        return self.inner.name

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        on_delta: Any = None,
        on_retry: Any = None,
    ) -> AssistantTurn:
        start = time.perf_counter()
        turn = self.inner.complete(messages, tools, on_delta=on_delta, on_retry=on_retry)
        self.spans.append((start, time.perf_counter()))
        return turn

    def gaps_ms(self) -> list[float]:
        """Time between one call's end and the next call's start: the harness's share."""
        return [(b[0] - a[1]) * 1000 for a, b in zip(self.spans, self.spans[1:], strict=False)]


def worker_reply(_model: str, request: dict[str, Any]) -> dict[str, Any]:
    """Plan once, then alternate writing a new file and reading one back."""
    names = {t["function"]["name"] for t in request.get("tools") or []}
    if "submit_plan" in names:
        return reply(None, tool_call("submit_plan", plan="1. write files"))
    turn = sum(1 for m in request.get("messages") or [] if m.get("role") == "assistant")
    if turn % 2:
        return reply(None, tool_call("read_file", path="README.md"))
    return reply(None, tool_call("write_file", path=f"bench/out_{turn}.txt", content="x" * 200))


def make_repo(root: Path, files: int) -> Path:
    """A git repository with ``files`` small Python modules, 100 per directory, committed."""
    return shared_repo(
        root / "repo",
        files,
        lambda n: (f"pkg{n // 100:03d}/mod{n % 100:03d}.py", f"VALUE_{n} = {n}\n"),
    )


def harness_gaps(root: Path, repo: Path, turns: int) -> list[float]:
    """Per-turn harness overhead (ms) through the real pipeline."""
    os.environ["TILTH_HOME"] = str(root / "home")
    settings = replace(load_settings(), max_iterations_per_task=turns + 1)
    session = Session.create(settings.sessions_dir, repo)
    worktree = git_worktrees.ensure_worktree(repo, session.workspace_dir, session.branch)
    session.save_prd([TASK])
    model = TimedModel(ScriptedModel(Script(worker_reply), "scripted-bench"))
    recorder = Recorder(session, worktree)
    ctx = RunContext(
        session=session,
        settings=settings,
        worktree=worktree,
        worker=model,
        evaluator=model,
        recorder=recorder,
        progress=SilentProgress(),
        scripted=True,
        started=time.monotonic(),
    )
    outcome = run_task(ctx, Task.from_dict(TASK))
    assert outcome.reason == "iter_cap", outcome
    close = getattr(recorder.observer, "close", None)
    if callable(close):
        close()
    return model.gaps_ms()[1:]  # the first gap is the planning → implementing stage switch


def baseline_gaps(repo: Path, turns: int) -> list[float]:
    """The same model and tool calls in a bare loop: model call + one dispatch per turn."""
    model = TimedModel(ScriptedModel(Script(worker_reply), "scripted-bench"))
    box = ToolBox(repo)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    tools = box.schemas()
    for _ in range(turns):
        turn = model.complete(messages, tools)
        messages.append(turn.history_message())
        for call in turn.tool_calls:
            outcome = box.dispatch(call.name, call.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": outcome.result})
    return model.gaps_ms()


def _row(name: str, gaps: list[float]) -> str:
    ordered = sorted(gaps)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return (
        f"{name:<28} median {statistics.median(gaps):7.2f} ms   p95 {p95:7.2f} ms   n={len(gaps)}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=40)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tilth-bench-turn-"))
    saved = dict(os.environ)
    try:
        for key in [k for k in os.environ if k.startswith("TILTH_")]:
            del os.environ[key]
        started = time.perf_counter()
        repo = make_repo(root, args.files)
        print(f"repository: {args.files} files, built in {time.perf_counter() - started:.1f}s")
        harness = harness_gaps(root, repo, args.turns)
        baseline = baseline_gaps(repo, args.turns)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(root, ignore_errors=True)
    print(_row("bare loop (baseline)", baseline))
    print(_row("tilth worker turn", harness))
    extra = statistics.median(harness) - statistics.median(baseline)
    verdict = "within" if statistics.median(harness) <= GOAL_MS else "OVER"
    print(f"harness overhead: median {extra:+.2f} ms over the baseline")
    print(f"tilth median {verdict} the {GOAL_MS:.0f} ms goal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
