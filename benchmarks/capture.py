"""Turn-capture cost on synthetic repositories, beside a shadow-git baseline in the same run.

Run: ``python -m benchmarks.capture [--sizes 1000,10000,100000] [--turns 15]``.

For each size it builds a workspace of N files (about 1 KB each, 100 per directory),
commits it, then measures:

- Tilth, edit turn: three files announced through ``before_write`` and written, then
  ``finish_turn`` (the capture cost only; the writes themselves are not timed);
- Tilth, bash turn: a real ``bash`` that modifies three files, creates one and deletes
  one; ``before_bash`` + ``after_bash`` + ``finish_turn`` timed (not the command), once
  with the inotify watcher and once with the stat-scan fallback;
- shadow git (the Cline / Gemini CLI layout: a separate git dir with the workspace as work
  tree): the first snapshot, then ``add -A`` + ``commit`` per turn with a persistent index;
- restore of a checkpoint ten turns back and forth: Tilth with the live change feed of a
  process that records the turns itself; Tilth in a new process (``tilth rewind -y``: no
  caches, the plan reads only the files that differ between the recorded states, the apply
  writes only those); the same after the survey a dry run or a confirmation shows (one
  walk of the worktree, ``git status``); and shadow git (``read-tree -u --reset`` + clean);
- bytes stored per turn (blob store growth vs shadow git dir growth).

Not run by the test suite; figures depend on the machine. Medians over ``--turns`` turns.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from tilth.timeline.record.blob_store import BlobStore
from tilth.timeline.record.git_reads import TreeCache
from tilth.timeline.record.turn_capture import TurnCapture, TurnResult
from tilth.timeline.rewind.code_restore import apply_code, keep_conflicts, plan_code

RESTORES = 6
"""Restores timed per size, alternating ten turns back and forward again (medians shown)."""
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
}


def _git(cwd: Path, *args: str, git_dir: Path | None = None) -> str:
    prefix = ["git"] if git_dir is None else ["git", f"--git-dir={git_dir}", f"--work-tree={cwd}"]
    return subprocess.run(
        [*prefix, *args], cwd=cwd, env=ENV, check=True, capture_output=True, text=True
    ).stdout


def make_workspace(root: Path, n: int) -> list[str]:
    """``n`` files of about 1 KB, 100 per directory, committed; returns their paths."""
    root.mkdir(parents=True)
    paths = []
    for i in range(n):
        rel = f"d{i // 10000:02d}/d{(i // 100) % 100:02d}/f{i % 100:02d}.txt"
        target = root / rel
        if i % 100 == 0:
            target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((f"file {i} line\n" * 64)[:1000])
        paths.append(rel)
    (root / ".gitignore").write_text(".venv/\n")
    _git(root, "init", "-q", "-b", "main")
    # No background `gc --auto` racing the measurements (or the clean-up) in either repo.
    _git(root, "config", "gc.auto", "0")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "initial")
    return paths


def _dir_bytes(path: Path) -> int:
    total = 0
    for current, _, names in os.walk(path):
        for name in names:
            try:
                total += (Path(current) / name).stat().st_size
            except FileNotFoundError:
                continue
    return total


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


@dataclass
class Figures:
    """One size's measurements, in milliseconds and bytes."""

    files: int
    watcher: str = "-"
    init_ms: float = 0.0
    edit_ms: list[float] = field(default_factory=list)
    bash_inotify_ms: list[float] = field(default_factory=list)
    bash_scan_ms: list[float] = field(default_factory=list)
    restore_ms: list[float] = field(default_factory=list)
    restore_cold_ms: list[float] = field(default_factory=list)
    restore_survey_ms: list[float] = field(default_factory=list)
    store_bytes_per_turn: float = 0.0
    changed_bytes_per_turn: float = 0.0
    shadow_first_ms: float = 0.0
    shadow_turn_ms: list[float] = field(default_factory=list)
    shadow_restore_ms: list[float] = field(default_factory=list)
    shadow_bytes_per_turn: float = 0.0


class Turns:
    """Deterministic edit and bash turns over a workspace's files."""

    def __init__(self, root: Path, paths: list[str]) -> None:
        self.root = root
        self.paths = paths
        self.counter = 0

    def edit(self) -> list[str]:
        self.counter += 1
        step = max(1, len(self.paths) // 7)
        chosen = [self.paths[(self.counter * 31 + k * step) % len(self.paths)] for k in range(3)]
        for rel in chosen:
            (self.root / rel).write_text(f"edit {self.counter} of {rel}\n" * 40)
        return chosen

    def bash_command(self) -> str:
        self.counter += 1
        picks = [self.paths[(self.counter * 97 + k * 13) % len(self.paths)] for k in range(4)]
        mods = " && ".join(f"echo 'bash {self.counter}' >> {p}" for p in picks[:3])
        return f"{mods} && echo new > new_{self.counter}.txt && rm -f new_{self.counter - 2}.txt"

    def run_bash(self, command: str) -> None:
        subprocess.run(["bash", "-c", command], cwd=self.root, check=True)


def bench_tilth(fig: Figures, work: Path, ws: Path, paths: list[str], turns: int) -> None:
    store = BlobStore(work / "home" / "snapshots")
    start = time.perf_counter()
    capture = TurnCapture(None, ws, store)
    capture.resync()  # set-up is lazy (first use); time it here, apart from the turns
    fig.init_ms = (time.perf_counter() - start) * 1000
    fig.watcher = capture.watcher_kind  # a silent fallback to the stat scan shows here
    plan = Turns(ws, paths)
    history: list[TurnResult] = []
    changed_bytes = 0
    before = _dir_bytes(store.root) if store.root.exists() else 0
    for _ in range(turns):
        chosen = plan.edit()
        start = time.perf_counter()
        for rel in chosen:
            capture.before_write(ws / rel)
        result = capture.finish_turn()
        fig.edit_ms.append((time.perf_counter() - start) * 1000)
        changed_bytes += sum((ws / rel).stat().st_size for rel in chosen)
        history.append(result)
    fig.store_bytes_per_turn = (_dir_bytes(store.root) - before) / turns
    fig.changed_bytes_per_turn = changed_bytes / turns
    for _ in range(turns):
        command = plan.bash_command()
        elapsed = _timed(partial(capture.before_bash, command))
        plan.run_bash(command)
        elapsed += _timed(partial(capture.after_bash, command))
        elapsed += _timed(capture.finish_turn)
        fig.bash_inotify_ms.append(elapsed)
    capture.close()
    os.environ["TILTH_CAPTURE_WATCH"] = "scan"
    try:
        scanning = TurnCapture(None, ws, store)
        scanning.resync()
    finally:
        os.environ.pop("TILTH_CAPTURE_WATCH", None)
    for _ in range(turns):
        command = plan.bash_command()
        elapsed = _timed(partial(scanning.before_bash, command))
        plan.run_bash(command)
        elapsed += _timed(partial(scanning.after_bash, command))
        start = time.perf_counter()
        history.append(scanning.finish_turn())
        elapsed += (time.perf_counter() - start) * 1000
        fig.bash_scan_ms.append(elapsed)
    scanning.close()
    latest = history[-1]
    target = history[max(0, len(history) - 11)]

    def restore(
        to: TurnResult, at: TurnResult, changed: set[str] | None, trees: TreeCache | None = None
    ) -> None:
        trees = trees or TreeCache(ws)  # one per restore, as a new process has
        code = plan_code(ws, to.head, to.overlay, at.head, at.overlay, changed=changed, trees=trees)
        keep_conflicts(code, ws, store)
        apply_code(code, ws, store, trees)

    # A new process (`tilth rewind -y`): no caches, no change feed; the plan reads just the
    # files that differ between the recorded states (and checks those for the user's edits).
    at, to = latest, target
    for _ in range(RESTORES):
        fig.restore_cold_ms.append(_timed(partial(restore, to, at, set())))
        at, to = to, at
    # The same with the survey a person reads first (dry run, confirmation): one walk.
    for _ in range(RESTORES):
        fig.restore_survey_ms.append(_timed(partial(restore, to, at, None)))
        at, to = to, at
    # A process that records the turns itself (a library user driving the session): its
    # change feed says what changed since the last recorded state, the user's edits included.
    live = TurnCapture(None, ws, store)
    live.resync()
    at, to = latest, target
    for _ in range(RESTORES):
        changed = live.changed_since_turn()
        fig.restore_ms.append(_timed(partial(restore, to, at, changed, live.trees)))
        live.resync()  # the restored state is the recorded one now (not timed)
        at, to = to, at
    live.close()


def bench_shadow(fig: Figures, work: Path, ws: Path, paths: list[str], turns: int) -> None:
    shadow = work / "shadow.git"
    _git(ws, "init", "-q", "--bare", str(shadow))
    _git(ws, "config", "core.bare", "false", git_dir=shadow)
    _git(ws, "config", "gc.auto", "0", git_dir=shadow)

    def snapshot() -> None:
        _git(ws, "add", "-A", git_dir=shadow)
        _git(ws, "commit", "-q", "--allow-empty", "--no-verify", "-m", "turn", git_dir=shadow)

    fig.shadow_first_ms = _timed(snapshot)
    plan = Turns(ws, paths)
    plan.counter = 10_000
    before = _dir_bytes(shadow)
    shas = []
    for i in range(turns * 2):
        if i % 2:
            plan.run_bash(plan.bash_command())
        else:
            plan.edit()
        fig.shadow_turn_ms.append(_timed(snapshot))
        shas.append(_git(ws, "rev-parse", "HEAD", git_dir=shadow).strip())
    fig.shadow_bytes_per_turn = (_dir_bytes(shadow) - before) / (turns * 2)
    target = shas[max(0, len(shas) - 11)]

    def restore(sha: str) -> None:
        _git(ws, "read-tree", "-u", "--reset", sha, git_dir=shadow)
        _git(ws, "clean", "-q", "-fd", git_dir=shadow)

    for index in range(RESTORES):
        sha = target if index % 2 == 0 else shas[-1]
        fig.shadow_restore_ms.append(_timed(partial(restore, sha)))


def run_size(n: int, turns: int, base: Path) -> Figures:
    work = base / f"n{n}"
    ws = work / "workspace"
    paths = make_workspace(ws, n)
    fig = Figures(n)
    bench_tilth(fig, work, ws, paths, turns)
    # The shadow baseline gets its own fresh copy so neither run warms the other's caches.
    shutil.rmtree(ws)
    ws = work / "workspace2"
    paths = make_workspace(ws, n)
    bench_shadow(fig, work, ws, paths, turns)
    return fig


def _med(values: list[float]) -> str:
    return f"{statistics.median(values):.1f}" if values else "-"


def render(figures: list[Figures]) -> str:
    """The results as a plain-text table (one column per repository size)."""
    rows: list[tuple[str, list[str]]] = [
        ("change feed in use", [f.watcher for f in figures]),
        ("capture set-up (ms, once per process)", [f"{f.init_ms:.0f}" for f in figures]),
        ("edit turn, 3 files: tilth p50 (ms)", [_med(f.edit_ms) for f in figures]),
        ("bash turn: tilth inotify p50 (ms)", [_med(f.bash_inotify_ms) for f in figures]),
        ("bash turn: tilth stat-scan p50 (ms)", [_med(f.bash_scan_ms) for f in figures]),
        ("shadow git first snapshot (ms)", [f"{f.shadow_first_ms:.0f}" for f in figures]),
        ("shadow git per turn p50 (ms)", [_med(f.shadow_turn_ms) for f in figures]),
        (
            "bash turn speed-up vs shadow (inotify)",
            [
                f"{statistics.median(f.shadow_turn_ms) / statistics.median(f.bash_inotify_ms):.0f}x"
                for f in figures
            ],
        ),
        ("restore 10 turns back: tilth, live feed p50 (ms)", [_med(f.restore_ms) for f in figures]),
        (
            "restore 10 turns back: tilth, new process p50 (ms)",
            [_med(f.restore_cold_ms) for f in figures],
        ),
        (
            "  the same after a survey (one walk) p50 (ms)",
            [_med(f.restore_survey_ms) for f in figures],
        ),
        (
            "restore 10 turns back: shadow git p50 (ms)",
            [_med(f.shadow_restore_ms) for f in figures],
        ),
        ("bytes changed per edit turn", [f"{f.changed_bytes_per_turn:.0f}" for f in figures]),
        ("bytes stored per edit turn: tilth", [f"{f.store_bytes_per_turn:.0f}" for f in figures]),
        ("bytes stored per turn: shadow git", [f"{f.shadow_bytes_per_turn:.0f}" for f in figures]),
    ]
    header = ["metric \\ files", *[f"{f.files:,}" for f in figures]]
    width = max(len(r[0]) for r in rows) + 2
    lines = [header[0].ljust(width) + "".join(h.rjust(12) for h in header[1:])]
    for name, values in rows:
        lines.append(name.ljust(width) + "".join(v.rjust(12) for v in values))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated file counts")
    parser.add_argument("--turns", type=int, default=15, help="turns measured per kind")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    figures = []
    with tempfile.TemporaryDirectory(prefix="tilth-bench-") as tmp:
        for n in sizes:
            print(f"measuring {n:,} files...", flush=True)
            figures.append(run_size(n, args.turns, Path(tmp)))
    print(render(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
