"""Rewind and reset --to-seed on a big session, beside a naive baseline in the same run.

Run: ``python benchmarks/rewind.py`` (sizes from ``TILTH_BENCH_LOG_MB``, default 100,
and ``TILTH_BENCH_FILES``, default 10000).

It builds a session whose worktree holds N files and whose ``events.jsonl`` is about
that many MB, with a task-start checkpoint half-way through the log and commits that
touch a few hundred files on each side of it. Then, restoring the session between
measurements, it times:

- learning where the log stands for a checkpoint (the Recorder reads the log's
  tail) against a naive recorder that reads every line; the whole recording time
  (git and state included) is printed too;
- finding and cutting the log for a rewind to the mid checkpoint and for a reset to
  the seed: the engine truncates at the recorded byte offset (and tallies dropped
  event types with one regex pass for the plan), the baseline parses every line to
  find the cut and rewrites the file;
- the whole ``rewind --scope both`` and ``reset --to-seed`` through the engine (plan +
  journaled execute, git included), against the baseline's log work plus the same git
  reset and clean.

Goals: the log position at least 10x faster than the baseline; each log cut at
least 2x faster; each whole operation faster than the baseline. Returns 1 when a goal is missed.
Not run by the test suite; figures depend on the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "benchmarks"):  # tilth from a checkout; the shared _helpers
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from _helpers import GIT_IDENTITY  # noqa: E402
from _helpers import make_repo as shared_repo  # noqa: E402

from tilth import git  # noqa: E402
from tilth.git import worktrees as git_worktrees  # noqa: E402
from tilth.session.store import Session  # noqa: E402
from tilth.timeline import Recorder, execute_rewind, plan_rewind, resolve_checkpoint  # noqa: E402
from tilth.timeline.record.state_capture import log_tail  # noqa: E402
from tilth.timeline.rewind.change_report import tally_events  # noqa: E402
from tilth.timeline.rewind.seed_reset import find_anchor, plan_reset_to_seed, preflight  # noqa: E402

ENV = GIT_IDENTITY


def _sh(cwd: Path, *args: str) -> None:
    subprocess.run(args, cwd=cwd, check=True, capture_output=True, env={**os.environ, **ENV})


def make_repo(path: Path, files: int) -> None:
    """A repository of ``files`` small files (8 lines each), 100 per directory."""
    shared_repo(path, files, lambda i: (f"d{i // 100:03d}/f{i % 100:02d}.txt", f"file {i}\n" * 8))


def bulk_events(session: Session, megabytes: float, seq: int) -> int:
    """Append about ``megabytes`` of run-like events in one go; returns the next seq."""
    target = session.events.size() + int(megabytes * (1 << 20))
    payload = {"actor": "worker", "text": "x" * 300, "tool": "bash", "ok": True}
    kinds = ("model_call", "tool_call", "tool_result")
    with open(session.events.path, "a", encoding="utf-8") as handle:
        while handle.tell() < target:
            lines = []
            for _ in range(1000):
                record = {
                    "v": 1,
                    "seq": seq,
                    "ts": "2026-01-01T00:00:00.000Z",
                    "type": kinds[seq % 3],
                    "payload": payload,
                }
                lines.append(json.dumps(record))
                seq += 1
            handle.write("\n".join(lines) + "\n")
    return seq


def touch_files(worktree: Path, start: int, count: int, message: str) -> None:
    for i in range(start, start + count):
        path = worktree / f"d{i // 100:03d}" / f"f{i % 100:02d}.txt"
        path.write_text(f"changed by {message}\n")
    git.commit_all(worktree, message)


def build(root: Path, megabytes: float, files: int) -> tuple[Session, Path]:
    """The big session: seed, half the log, a task start, more work, the other half."""
    repo = root / "repo"
    make_repo(repo, files)
    session = Session.create(root / "sessions", repo)
    worktree = git_worktrees.ensure_worktree(repo, session.workspace_dir, session.branch)
    session.update_checkpoint(workspace=str(worktree), branch=session.branch, tokens_used=10)
    session.log("session_start", phase="prep-feature", source=str(repo))
    session.save_prd(
        [
            {
                "id": "T-001",
                "title": "t",
                "description": "d",
                "acceptance_criteria": ["works"],
                "status": "pending",
            }
        ]
    )
    (worktree / "tests").mkdir()
    (worktree / "tests" / "test_t001_works.py").write_text("def test_it():\n    pass\n")
    sha = git.commit_all(worktree, "seed: 1 task(s) + 1 acceptance test(s)")
    session.log("session_prepared", tokens_used=10)
    session.log("seed_committed", sha=sha, branch=session.branch)
    session.set_status("prepared")
    recorder = Recorder(session, worktree)
    recorder.observer = None  # heads only: this benchmark is about the log and git
    recorder.seed()
    seq = session.events.append("session_start", {"phase": "run"}).seq + 1
    seq = bulk_events(session, megabytes / 2, seq)
    touch_files(worktree, 0, 200, "task/T-001: complete planning stage")
    session.set_status("running")
    recorder.task_start("T-001")
    seq = bulk_events(session, megabytes / 2, seq + 1)
    touch_files(worktree, 200, 300, "task/T-001: complete implementing stage")
    (worktree / "untracked.txt").write_text("left over\n")
    return session, worktree


# ---- the naive baseline -----------------------------------------------------------------
def naive_record(session: Session) -> tuple[int, int]:
    """Where the log stands, learned the naive way: read every line, parse the last."""
    count, last = 0, b""
    with open(session.events.path, "rb") as handle:
        for line in handle:
            count += 1
            last = line
    return count, int(json.loads(last)["seq"])


def naive_cut(session: Session, keep: Callable[[dict[str, object]], bool]) -> None:
    """Parse lines until ``keep`` says stop (inclusive), then rewrite the log up to there."""
    path = session.events.path
    tmp = path.with_suffix(".tmp")
    with open(path, "rb") as src, open(tmp, "wb") as dst:
        for line in src:
            record = json.loads(line)
            dst.write(line)
            if not keep(record):
                break
        for line in src:  # the baseline still reads (and parses) the rest to count what drops
            json.loads(line)
        dst.flush()
        os.fsync(dst.fileno())
    os.replace(tmp, path)


def git_reset(worktree: Path, sha: str) -> None:
    git.reset_hard(worktree, sha)
    git.clean_fd(worktree)


# ---- measuring ---------------------------------------------------------------------------------
class Restorer:
    """Puts the session (dir and worktree) back as built, between measurements."""

    def __init__(self, session: Session, worktree: Path, scratch: Path) -> None:
        self.session, self.worktree = session, worktree
        self.copy = scratch / "pristine"
        self.head = git.head(worktree)
        shutil.copytree(session.dir, self.copy, ignore=shutil.ignore_patterns("workspace"))

    def __call__(self) -> None:
        for entry in self.session.dir.iterdir():
            if entry.name == "workspace":
                continue
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        for entry in self.copy.iterdir():
            target = self.session.dir / entry.name
            shutil.copytree(entry, target) if entry.is_dir() else shutil.copy2(entry, target)
        git_reset(self.worktree, self.head)
        (self.worktree / "untracked.txt").write_text("left over\n")


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> int:
    megabytes = float(os.environ.get("TILTH_BENCH_LOG_MB") or 100)
    files = int(os.environ.get("TILTH_BENCH_FILES") or 10000)
    os.environ.update(ENV)
    scratch = Path(tempfile.mkdtemp(prefix="tilth-bench-rewind-"))
    os.environ.setdefault("TILTH_HOME", str(scratch / "home"))
    try:
        t0 = time.perf_counter()
        session, worktree = build(scratch / "w", megabytes, files)
        size = session.events.size() / (1 << 20)
        print(
            f"session: {size:.0f} MB events.jsonl, {files} files; built in "
            f"{time.perf_counter() - t0:.1f}s"
        )
        restore = Restorer(session, worktree, scratch)
        mid = resolve_checkpoint(session, "T-001")
        seed = preflight(session)
        rows: list[tuple[str, float, float, float]] = []

        recorder = Recorder(session, worktree)
        recorder.observer = None
        where = timed(lambda: log_tail(session.events.path))
        rows.append(("where the log stands", where, timed(lambda: naive_record(session)), 10))
        record = timed(
            lambda: recorder.turn("worker", task_id="T-001", stage="planning", turn=1, label="b")
        )
        restore()

        cut_mid = timed(lambda: session.events.truncate(mid.event_offset))
        restore()
        tally = timed(lambda: tally_events(session.events.path, mid.event_offset))
        naive_mid = timed(lambda: naive_cut(session, lambda r: r.get("seq") != mid.event_seq))
        restore()
        rows.append(("rewind: find + cut the log", cut_mid + tally, naive_mid, 2))

        find = timed(lambda: find_anchor(session))
        tally = timed(lambda: tally_events(session.events.path, seed.end))
        cut_seed = timed(lambda: session.events.truncate(seed.end))
        restore()
        naive_seed = timed(lambda: naive_cut(session, lambda r: r.get("type") != "seed_committed"))
        restore()
        rows.append(("reset: find + cut the log", find + tally + cut_seed, naive_seed, 2))

        whole = timed(lambda: execute_rewind(session, plan_rewind(session, mid, "both")))
        restore()
        git_mid = timed(lambda: git_reset(worktree, mid.head))
        restore()
        rows.append(("rewind --scope both (whole)", whole, naive_mid + git_mid, 1))

        whole = timed(
            lambda: execute_rewind(session, plan_reset_to_seed(session, preflight(session)))
        )
        restore()
        git_seed = timed(lambda: git_reset(worktree, seed.sha))
        restore()
        rows.append(("reset --to-seed (whole)", whole, naive_seed + git_seed, 1))
        print(f"recording one checkpoint, whole (git included): {record * 1000:.1f}ms")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"{'operation':32} {'tilth':>10} {'naive':>10} {'speed-up':>9} {'goal':>6}")
    missed = []
    for name, ours, naive, goal in rows:
        ratio = naive / ours if ours > 0 else float("inf")
        flag = "" if ratio >= goal else "  MISSED"
        if flag:
            missed.append(name)
        print(
            f"{name:32} {ours * 1000:8.1f}ms {naive * 1000:8.1f}ms {ratio:8.1f}x {goal:>5}x{flag}"
        )
    if missed:
        print("missed: " + ", ".join(missed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
