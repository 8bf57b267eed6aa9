"""``tilth serve``: the session page of a 1,000-turn session, and SSE delivery latency.

Run: ``python benchmarks/serve.py`` (turns from ``TILTH_BENCH_TURNS``, default 1000).

It builds a session with one task whose implementing stage has N recorded turns
(events, thread messages and a turn checkpoint per turn, written through the
session and timeline libraries), starts the real ``tilth serve --port 0`` and
measures, over loopback:

- the session page: the HTML, ``GET /api/sessions/<id>`` and
  ``GET /api/sessions/<id>/checkpoints`` (what the page loads to draw the
  timeline), each and together, with their payload sizes;
- delivery: the time from calling ``EventLog.append`` to the event arriving
  at a client following ``GET /api/sessions/<id>/events``;
- under load (figures only, no goal): 20 clients polling the session's API once a second
  while 200 events are appended at about 50 a second (``tests/web/test_load.py`` checks
  the same traffic for what it must not lose, by count): polls answered a second, their
  latency, and the rate the events went in.

Goals: the whole page (HTML + both JSON reads) ≤ 300 ms median; an event reaches
the SSE client ≤ 200 ms median after it was appended. Returns 1 when a goal is missed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from tilth import git  # noqa: E402
from tilth.git import worktrees as git_worktrees  # noqa: E402
from tilth.session.store import Session  # noqa: E402
from tilth.timeline import Recorder  # noqa: E402

PAGE_GOAL_MS = 300.0
SSE_GOAL_MS = 200.0
ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
}


def build(root: Path, turns: int) -> Session:
    """A seeded session whose T-001 implementing stage holds ``turns`` recorded turns."""
    repo = root / "repo"
    repo.mkdir(parents=True)
    (repo / "README.md").write_text("# bench\n")
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-q", "-m", "initial")):
        subprocess.run(["git", *args], cwd=repo, check=True, env={**os.environ, **ENV})
    session = Session.create(root / "home" / "sessions", repo)
    worktree = git_worktrees.ensure_worktree(repo, session.workspace_dir, session.branch)
    session.update_checkpoint(workspace=str(worktree), branch=session.branch)
    session.log("session_start", phase="prep-feature", source=str(repo))
    session.save_prd(
        [
            {
                "id": "T-001",
                "title": "A long task",
                "description": "Many turns.",
                "acceptance_criteria": ["it works"],
                "status": "in_progress",
            }
        ]
    )
    (worktree / "tests").mkdir()
    (worktree / "tests" / "test_t001_long.py").write_text("def test_it():\n    pass\n")
    sha = git.commit_all(worktree, "seed: 1 task(s) + 1 acceptance test(s)")
    session.log("session_prepared", tokens_used=0)
    session.log("seed_committed", sha=sha, branch=session.branch)
    recorder = Recorder(session, worktree)
    recorder.observer = None  # heads only: this benchmark is about serving, not capture
    recorder.seed()
    session.set_status("running")
    session.log("task_start", task_id="T-001", title="A long task")
    recorder.task_start("T-001")
    thread = session.threads.get("worker.T-001.implementing")
    where = {"actor": "worker", "task_id": "T-001", "stage": "implementing"}
    for turn in range(1, turns + 1):
        thread.append({"role": "assistant", "content": f"turn {turn}: editing"})
        session.log("model_call", **where, turn=turn, model="bench", tool_calls=["write_file"])
        written = {"path": f"src/f{turn % 50}.py", "content": f"x = {turn}\n" * 20}
        session.log("tool_call", **where, turn=turn, tool="write_file", args=written)
        session.log("tool_result", **where, turn=turn, tool="write_file", result_preview="ok")
        recorder.turn(
            "worker", task_id="T-001", stage="implementing", turn=turn, label=f"turn {turn}"
        )
    return session


def start_server(home: Path) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILTH_")}
    env["TILTH_HOME"] = str(home)
    process = subprocess.Popen(
        [sys.executable, "-m", "tilth", "serve", "--port", "0", "--no-open"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def page_times(base: str, token: str, sid: str, runs: int) -> dict[str, tuple[list[float], int]]:
    """Milliseconds per request (and payload bytes) for each part of the session page."""
    parts = {
        "html": f"/s/{sid}",
        "session": f"/api/sessions/{sid}",
        "checkpoints": f"/api/sessions/{sid}/checkpoints",
    }
    out: dict[str, tuple[list[float], int]] = {name: ([], 0) for name in parts}
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        for _ in range(3):  # warm the server's imports and the OS caches
            for path in parts.values():
                client.get(path).raise_for_status()
        for _ in range(runs):
            for name, path in parts.items():
                start = time.perf_counter()
                answer = client.get(path)
                elapsed = (time.perf_counter() - start) * 1000
                answer.raise_for_status()
                out[name][0].append(elapsed)
                out[name] = (out[name][0], len(answer.content))
    return out


def sse_latencies(base: str, token: str, session: Session, count: int) -> list[float]:
    """Milliseconds from calling ``append`` to the event reaching a following client."""
    appended: dict[int, float] = {}
    arrived: dict[int, float] = {}
    ready = threading.Event()
    headers = {"Authorization": f"Bearer {token}"}
    last = session.events.events()[-1].seq

    def listen() -> None:
        timeout = httpx.Timeout(10, read=60)
        with (
            httpx.Client(base_url=base, headers=headers, timeout=timeout) as client,
            client.stream(
                "GET", f"/api/sessions/{session.id}/events", headers={"Last-Event-ID": str(last)}
            ) as response,
        ):
            ready.set()
            for line in response.iter_lines():
                if line.startswith("data: "):
                    seq = json.loads(line[6:])["seq"]
                    arrived[seq] = time.perf_counter()
                    if len(arrived) >= count:
                        return

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    ready.wait(10)
    time.sleep(0.5)
    for n in range(count):
        before = time.perf_counter()
        event = session.log("bench_note", n=n)
        appended[event.seq] = before
        time.sleep(0.1)
    listener.join(30)
    return [(arrived[s] - appended[s]) * 1000 for s in appended if s in arrived]


def under_load(base: str, token: str, session: Session, clients: int = 20) -> None:
    """Print how the API answers ``clients`` pollers while events are appended."""
    sid = session.id
    paths = ["/api/sessions", f"/api/sessions/{sid}", f"/api/sessions/{sid}/checkpoints"]
    headers = {"Authorization": f"Bearer {token}"}
    waits: list[float] = []
    failed: list[str] = []
    done = threading.Event()

    def poller() -> None:
        with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
            count = 0
            while not done.is_set():
                start = time.perf_counter()
                try:
                    client.get(paths[count % len(paths)]).raise_for_status()
                    waits.append((time.perf_counter() - start) * 1000)
                except httpx.HTTPError as exc:
                    failed.append(str(exc))
                count += 1
                done.wait(1.0)

    threads = [threading.Thread(target=poller, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    started = time.perf_counter()
    for n in range(200):
        session.log("bench_load", n=n, text=("x" * 120_000) if n % 25 == 0 else f"line {n}")
        time.sleep(0.02)
    writing = time.perf_counter() - started
    done.set()
    for thread in threads:
        thread.join(60)
    elapsed = time.perf_counter() - started
    print(
        f"under load ({clients} pollers): {len(waits) / elapsed:.1f} polls/s answered, "
        f"{_stats(waits or [0.0])}; {200 / writing:.0f} events/s appended"
        + (f"; {len(failed)} polls FAILED" if failed else "")
    )


def _stats(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"median {statistics.median(values):7.1f} ms  (min {low:.1f}, max {high:.1f})"


def main() -> int:
    turns = int(os.environ.get("TILTH_BENCH_TURNS", "1000"))
    root = Path(tempfile.mkdtemp(prefix="tilth-bench-serve-"))
    saved = dict(os.environ)
    process = None
    try:
        os.environ.update(ENV)
        started = time.perf_counter()
        session = build(root, turns)
        built = time.perf_counter() - started
        size = session.events.size()
        print(f"session: {turns} turns, {size:,} bytes of events, built in {built:.1f}s")
        process, url = start_server(root / "home")
        base, token = url.split("/?token=")
        parts = page_times(base, token, session.id, runs=15)
        totals = [sum(values) for values in zip(*(v for v, _ in parts.values()), strict=True)]
        for name, (values, size) in parts.items():
            print(f"  {name:12} {_stats(values)}  payload {size:,} bytes")
        page = statistics.median(totals)
        print(f"session page (all three) {_stats(totals)}  goal ≤ {PAGE_GOAL_MS:.0f} ms")
        latencies = sse_latencies(base, token, session, count=30)
        sse = statistics.median(latencies) if latencies else float("inf")
        got = f"{len(latencies)}/30 events"
        print(f"SSE delivery ({got}) {_stats(latencies or [sse])}  goal ≤ {SSE_GOAL_MS:.0f} ms")
        under_load(base, token, session)
    finally:
        if process is not None:
            os.killpg(process.pid, signal.SIGINT)
            process.wait(15)
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(root, ignore_errors=True)
    ok = page <= PAGE_GOAL_MS and sse <= SSE_GOAL_MS and len(latencies) == 30
    print("within the goals" if ok else "OVER a goal")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
