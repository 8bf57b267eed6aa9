"""Confinement to the workspace: resolve paths, walk files, match glob patterns.

Everything is checked after symlinks are resolved, so ``..``, absolute paths and
links pointing out are refused alike, and the walker never follows a directory
link nor yields a file whose target lies outside.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path, PurePosixPath

from tilth.errors import ToolError

# Directories no tool lists or searches (tool caches, VCS internals, harness state).
SKIP_DIRS = frozenset(
    {".git", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache", ".tilth"}
)


class Workspace:
    """A directory the tools are confined to."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()

    def resolve(self, raw: object, *, field: str = "path") -> Path:
        """``raw`` (relative to the root, or absolute inside it) resolved; refuses escapes."""
        if not isinstance(raw, str) or not raw.strip():
            raise ToolError(f"'{field}' must be a non-empty string")
        if "\x00" in raw:
            raise ToolError(f"'{field}' contains a NUL byte")
        candidate = Path(raw) if os.path.isabs(raw) else self.root / raw
        resolved = candidate.resolve()
        if not resolved.is_relative_to(self.root):
            raise ToolError(
                f"path escapes the workspace: {raw} (paths must stay inside the workspace)"
            )
        return resolved

    def open(self, path: Path, flags: int = os.O_RDONLY, *, create: bool = False) -> int:
        """A descriptor of ``path`` (resolved, inside the root) opened without following
        any link on the way, so a path swapped for a link after ``resolve`` fails here.

        Refuses what is not a regular file and a file with other hard links (its other
        names may lie outside). ``create`` makes missing directories and the file.
        """
        rel = path.relative_to(self.root).parts
        if not rel:
            raise ToolError(f"{self.relative(path)} is a directory")
        shown = self.relative(path)
        walk = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.root, walk)
        try:
            for part in rel[:-1]:
                if create:
                    try:
                        os.mkdir(part, 0o777, dir_fd=fd)
                    except FileExistsError:
                        pass
                try:
                    inner = os.open(part, walk, dir_fd=fd)
                except OSError as exc:
                    raise _moved(shown, exc, part, fd) from None
                os.close(fd)
                fd = inner
            extra = os.O_CREAT if create else 0
            last = flags | extra | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            try:
                opened = os.open(rel[-1], last, 0o666, dir_fd=fd)
            except FileNotFoundError:
                raise ToolError(f"no such file: {shown}") from None
            except IsADirectoryError:
                raise ToolError(f"{shown} is a directory") from None
            except OSError as exc:
                raise _moved(shown, exc, rel[-1], fd) from None
        finally:
            os.close(fd)
        try:
            self._check_opened(opened, shown)
        except BaseException:
            os.close(opened)
            raise
        return opened

    def _check_opened(self, fd: int, shown: str) -> None:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"not a file: {shown} (use glob to list a directory)")
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"not a regular file: {shown} (a device, pipe or socket)")
        if info.st_nlink > 1:
            raise ToolError(
                f"refusing {shown}: it is a hard link ({info.st_nlink} names), and another "
                "name may lie outside the workspace; copy it instead"
            )
        real = Path(os.readlink(f"/proc/self/fd/{fd}")) if os.path.isdir("/proc/self/fd") else None
        if real is not None and not real.is_relative_to(self.root):
            raise ToolError(f"path escapes the workspace: {shown} (it is really {real})")

    def relative(self, path: Path) -> str:
        """``path`` as shown to the model: relative to the root, POSIX separators."""
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return path.as_posix()
        return rel.as_posix() or "."

    def contains(self, path: Path) -> bool:
        """True when ``path`` (after resolving links) lies inside the root."""
        try:
            return path.resolve().is_relative_to(self.root)
        except (OSError, RuntimeError):
            return False

    def files(self) -> Iterator[tuple[str, Path]]:
        """Every regular file under the root as ``(relative posix path, path)``, sorted.

        Skips ``SKIP_DIRS``, never descends into directory links, and leaves out
        file links whose target is outside the root and files with other hard links.
        """
        for current, dirs, names in os.walk(self.root, followlinks=False):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            base = Path(current)
            for name in sorted(names):
                path = base / name
                if path.is_symlink() and not self.contains(path):
                    continue
                try:
                    info = path.stat()
                except OSError:
                    continue
                if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
                    continue  # a hard link's other name may lie outside: never listed
                yield path.relative_to(self.root).as_posix(), path

    def pattern(self, raw: object, *, field: str = "pattern") -> Glob:
        """A glob pattern (relative to the root) compiled; refuses patterns that point out."""
        if not isinstance(raw, str) or not raw.strip():
            raise ToolError(f"'{field}' must be a non-empty glob pattern such as '**/*.py'")
        text = raw.strip()
        if os.path.isabs(text):
            root = self.root.as_posix().rstrip("/") + "/"
            if not text.startswith(root):
                raise ToolError(
                    f"path escapes the workspace: {raw} (use a pattern relative to the workspace)"
                )
            text = text[len(root) :]
        parts = PurePosixPath(text).parts
        if ".." in parts:
            raise ToolError(f"path escapes the workspace: {raw} ('..' is not allowed in patterns)")
        return compile_glob("/".join(p for p in parts if p != ".") or "*")


def _moved(shown: str, exc: OSError, name: str, dir_fd: int) -> Exception:
    """A component of the path turned into a link after it was checked: an escape;
    any other failure is the filesystem's own error."""
    try:
        link = stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        link = False
    if not link:
        return exc
    return ToolError(
        f"path escapes the workspace: {shown} (a part of it became a link after it was "
        f"checked: {exc.strerror})"
    )


class Glob:
    """A glob over relative POSIX paths, as ``Path.glob`` reads it (``**`` = any depth).

    Matched segment by segment, each with ``fnmatch``'s expression (which never
    backtracks): one regular expression for the whole pattern backtracked without end on
    patterns such as ``*a*a*a*a*c`` or ``**/**/**/x``, which the model chooses.
    """

    def __init__(self, pattern: str) -> None:
        self.parts = pattern.split("/")
        self._names = [
            None if part == "**" else re.compile(fnmatch.translate(part)) for part in self.parts
        ]

    def match(self, path: str) -> bool:
        """True when ``path`` (relative, ``/``-separated) matches the whole pattern."""
        names = path.split("/")
        # reach[j]: the parts so far can consume exactly the first j names.
        reach = [True] + [False] * len(names)
        for index, regex in enumerate(self._names):
            if regex is None:
                last = index == len(self._names) - 1
                # ``**`` takes any number of whole names; the last one at least one.
                nxt = [False] * len(reach)
                for j, ok in enumerate(reach):
                    if ok:
                        for k in range(j + (1 if last else 0), len(reach)):
                            nxt[k] = True
                        break
                reach = nxt
            else:
                reach = [False] + [
                    reach[j] and regex.match(names[j]) is not None for j in range(len(names))
                ]
            if not any(reach):
                return False
        return reach[-1]


@lru_cache(maxsize=256)
def compile_glob(pattern: str) -> Glob:
    """The ``Glob`` of ``pattern`` (cached: the same patterns come back turn after turn)."""
    return Glob(pattern)
