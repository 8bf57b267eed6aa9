"""Reading git cheaply for turn capture: head's blob ids, HEAD itself, what git ignores.

Capture compares files with head without a ``git`` call per turn: one ``git ls-tree -r``
per head is cached, HEAD is read from the ref files, and ignore rules are asked of one
long-lived ``git check-ignore --stdin`` process.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
import weakref
from collections.abc import Iterable
from pathlib import Path

from tilth import git

GitId = tuple[str, str]
"""``(git mode, git blob sha)`` of one file."""


class TreeCache:
    """``git ls-tree -r`` of recent heads: path → (mode, blob sha)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._trees: dict[str, dict[str, GitId]] = {}
        self._asked: dict[str, dict[str, GitId | None]] = {}
        """Entries already looked up one by one, per head (None: not in that tree)."""

    def entries(self, head: str, paths: set[str]) -> dict[str, GitId]:
        """Head's entries for ``paths`` only (without listing the whole tree when not cached)."""
        tree = self._trees.get(head)
        if tree is not None:
            return {p: tree[p] for p in paths if p in tree}
        asked = self._asked.setdefault(head, {})
        if len(self._asked) > 4:
            self._asked.pop(next(iter(self._asked)))
        missing = paths - asked.keys()
        if missing:
            found = self._look_up(head, missing)
            asked.update({p: found.get(p) for p in missing})
        return {p: entry for p in paths if (entry := asked[p]) is not None}

    def _look_up(self, head: str, paths: set[str]) -> dict[str, GitId]:
        found: dict[str, GitId] = {}
        ordered = sorted(paths)
        for start in range(0, len(ordered), 500):
            chunk = ordered[start : start + 500]
            out = git.git(
                "ls-tree",
                "-r",
                "-z",
                "--full-tree",
                head,
                "--",
                *chunk,
                cwd=self.root,
                env={"GIT_LITERAL_PATHSPECS": "1"},
            )
            found.update(_parse_tree(out))
        return found

    def get(self, head: str) -> dict[str, GitId]:
        tree = self._trees.get(head)
        if tree is None:
            out = git.git("ls-tree", "-r", "-z", "--full-tree", head, cwd=self.root)
            tree = _parse_tree(out)
            if len(self._trees) >= 4:
                self._trees.pop(next(iter(self._trees)))
            self._trees[head] = tree
        return tree


def _parse_tree(out: str) -> dict[str, GitId]:
    """``git ls-tree -r -z`` output as path → (mode, blob sha); submodules are left out."""
    tree: dict[str, GitId] = {}
    for item in out.split("\0"):
        meta, _, path = item.partition("\t")
        parts = meta.split(" ")
        if len(parts) == 3 and parts[1] == "blob":
            tree[path] = (parts[0], parts[2])
    return tree


def read_head(worktree: Path) -> str:
    """The worktree's HEAD sha (``git.head`` reads it from the ref files)."""
    return git.head(worktree)


def dirty_paths(worktree: Path) -> list[str]:
    """Paths with uncommitted changes, untracked files included (one walk)."""
    return sorted(git.changed_paths(worktree))


def ignored_dirs(root: Path) -> set[str]:
    """Relative paths of the directories git ignores under ``root`` (collapsed), plus ``.git``."""
    out = git.git(
        "ls-files",
        "-z",
        "--others",
        "--ignored",
        "--exclude-standard",
        "--directory",
        cwd=root,
        check=False,
    )
    dirs = {p.rstrip("/") for p in out.split("\0") if p.endswith("/")}
    dirs.add(".git")
    return dirs


class IgnoreChecker:
    """Asks one long-lived ``git check-ignore --stdin`` which paths git ignores.

    Starting git costs milliseconds; a turn that creates files would pay it every time.
    Answers are cached; any trouble with the helper falls back to a one-shot call.
    """

    _CHUNK = 200

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cache: dict[str, bool] = {}
        self._proc: subprocess.Popen[bytes] | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                ["git", *git.inert_options(), "check-ignore", "--stdin", "-z", "-v", "-n"],
                cwd=self.root,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=git.inert_env({"GIT_FLUSH": "1"}),
                start_new_session=True,
            )
            self._finalizer = weakref.finalize(self, _stop_helper, self._proc)
        return self._proc

    def _ask(self, paths: list[str]) -> dict[str, bool]:
        proc = self._start()
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"".join(os.fsencode(p) + b"\0" for p in paths))
        proc.stdin.flush()
        want = 4 * len(paths)
        buffer = b""
        deadline = time.monotonic() + 10
        fd = proc.stdout.fileno()
        while buffer.count(b"\0") < want:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise OSError("git check-ignore did not answer")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise OSError("git check-ignore exited")
            buffer += chunk
        fields = buffer.split(b"\0")
        answers: dict[str, bool] = {}
        for i in range(len(paths)):
            _source, _line, pattern, name = fields[4 * i : 4 * i + 4]
            answers[os.fsdecode(name)] = bool(pattern) and not pattern.startswith(b"!")
        return answers

    def ignored(self, paths: Iterable[str]) -> set[str]:
        """The subset of ``paths`` git ignores."""
        unknown = sorted({p for p in paths if p not in self.cache})
        for start in range(0, len(unknown), self._CHUNK):
            chunk = unknown[start : start + self._CHUNK]
            try:
                answers = self._ask(chunk)
            except (OSError, ValueError):
                self.close()
                out = git.git(
                    "check-ignore",
                    "-z",
                    "--stdin",
                    cwd=self.root,
                    check=False,
                    input_text="\0".join(chunk) + "\0",
                )
                hits = set(out.split("\0"))
                answers = {p: p in hits for p in chunk}
            for p in chunk:
                self.cache[p] = answers.get(p, False)
        return {p for p in paths if self.cache.get(p)}

    def close(self) -> None:
        """Stop the helper process."""
        if self._proc is not None:
            self._finalizer()
            self._proc = None


def _stop_helper(proc: subprocess.Popen[bytes]) -> None:
    """End a ``git check-ignore`` helper and its pipes."""
    import signal

    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
