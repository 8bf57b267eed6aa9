"""What several benchmarks build alike: a git identity and a repository of many small files.

A file whose name starts with ``_`` is not run by ``run_all.py``.
"""

from __future__ import annotations

import os
import subprocess
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
