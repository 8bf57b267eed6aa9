"""What several benchmarks build alike: a git identity and a repository of many small files.

A file whose name starts with ``_`` is not run by ``run_all.py``.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
}
"""A git author and committer, so commits work on a machine with no git config."""


def text_file(i: int) -> tuple[str, str]:
    """File ``i`` of a repository: 100 per directory, one short line each."""
    return f"d{i // 100:04d}/f{i % 100:02d}.txt", f"file {i}\n"


def git_run(cwd: Path, *args: str) -> None:
    """``git <args>`` in ``cwd`` with the benchmark identity; raises on failure."""
    env = {**os.environ, **GIT_IDENTITY}
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def make_repo(path: Path, files: int, file: Callable[[int], tuple[str, str]] = text_file) -> Path:
    """A repository at ``path`` holding a README and ``files`` files (``file(i)`` gives
    each one's path and text), committed once on ``main``."""
    path.mkdir(parents=True)
    (path / "README.md").write_text("# bench\n")
    made: set[Path] = set()
    for i in range(files):
        name, text = file(i)
        target = path / name
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        target.write_text(text)
    git_run(path, "init", "-q", "-b", "main")
    git_run(path, "add", "-A")
    git_run(path, "commit", "-q", "-m", "initial")
    return path


def settle_disk(path: Path, quiet: float = 0.3, limit: float = 20.0) -> float:
    """``sync``, then wait until the disk holding ``path`` has gone ``quiet`` seconds with no
    write or discard started and none in flight (at most ``limit`` seconds); the seconds
    waited. On a file system mounted with ``discard`` the trims of deleted files run on in
    the background after ``sync`` returns, and a checkout timed meanwhile waits behind them
    by seconds; a figure timed after this pays only for its own writes."""
    subprocess.run(["sync"], check=True)
    device = os.stat(path).st_dev
    stat = Path(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}/stat")
    began = time.monotonic()
    if not stat.is_file():
        return 0.0  # not a block device Linux reports on (tmpfs, another system)
    last = _disk_counts(stat)
    calm_since = time.monotonic()
    while time.monotonic() - began < limit:
        time.sleep(0.05)
        now = _disk_counts(stat)
        if now != last or now[2]:
            last, calm_since = now, time.monotonic()
        elif time.monotonic() - calm_since >= quiet:
            break
    return time.monotonic() - began


def _disk_counts(stat: Path) -> tuple[int, int, int]:
    """Writes started, discards started and I/Os in flight (``/sys/block/*/stat``)."""
    fields = [int(v) for v in stat.read_text().split()]
    discards = fields[11] if len(fields) > 11 else 0
    return fields[4], discards, fields[8]
