"""The seed commit's copies of the seed tests, and the private directory they run in.

The seed is the contract: the gate runs the seed commit's copies of a task's seed tests
(with the seed's conftest files and pytest configuration), never the worktree's, and a
worktree that changed them is refused (``changed_seed_tests``). ``materialised`` writes
the copies into a private directory that mirrors the worktree around them.
"""

from __future__ import annotations

import configparser
import re
import shlex
import tempfile
import threading
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from tilth import git
from tilth.git.refs import git_dirs, is_sha
from tilth.safe_read import read_inside

_TASK_FILE_RE = re.compile(r"^test_(t\d{3,})_[a-z0-9_]+\.py$")


def slug_of(task_id: str) -> str:
    """``T-001`` → ``t001`` (the prefix of its seed test files)."""
    return re.sub(r"[^a-z0-9]", "", task_id.lower())


def seed_test_files(worktree: Path, task_ids: Iterable[str]) -> list[str]:
    """Workspace-relative seed test files of ``task_ids`` (``tests/test_t<NNN>_*.py``)."""
    tests = worktree / "tests"
    if not tests.is_dir():
        return []
    wanted = {slug_of(task_id) for task_id in task_ids}
    found = []
    for path in sorted(tests.iterdir()):
        match = _TASK_FILE_RE.match(path.name)
        if match and match.group(1) in wanted and path.is_file():
            found.append(f"tests/{path.name}")
    return found


# Files of the seed commit the seed tests may rely on, materialised beside them.
_SUPPORT_FILES = ("conftest.py", "tests/conftest.py", "tests/__init__.py")
# pytest's own search order; a file counts when it holds one of the sections ("" = always).
# pytest.toml, .pytest.toml and pyproject's [tool.pytest] are pytest 9's native TOML.
_PYTEST_CONFIGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pytest.toml", ("",)),
    (".pytest.toml", ("",)),
    ("pytest.ini", ("",)),
    (".pytest.ini", ("",)),
    ("pyproject.toml", ("[tool.pytest.ini_options]", "[tool.pytest]")),
    ("tox.ini", ("[pytest]",)),
    ("setup.cfg", ("[tool:pytest]",)),
)


@dataclass(frozen=True)
class SeedCopies:
    """The seed commit's copies of some seed tests, with what pytest needs beside them."""

    sha: str
    tests: dict[str, str]
    """Seed test path → content at the seed commit."""
    support: dict[str, str] = field(default_factory=dict)
    """conftest.py / ``tests/__init__.py`` / pytest config / other tasks' seed tests at the
    seed commit."""
    config: str | None = None
    """The pytest configuration file among ``support``, if the seed commit has one."""
    entries: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Seed test path → ``(mode, blob)`` at the seed commit (the index is compared with it)."""


def files_at(sha: str, paths: Sequence[str], worktree: Path) -> dict[str, str]:
    """Content of each of ``paths`` that exists at ``sha``."""
    return _files_and_entries_at(sha, paths, worktree)[0]


def _files_and_entries_at(
    sha: str, paths: Sequence[str], worktree: Path
) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """Content and ``(mode, blob)`` of each of ``paths`` that exists at ``sha``."""
    if not paths:
        return {}, {}
    # One listing and one batch read, whatever the number of paths.
    listed = git.git("ls-tree", "-z", sha, "--", *paths, cwd=worktree)
    entries: dict[str, tuple[str, str]] = {}
    for entry in filter(None, listed.split("\0")):
        meta, _, path = entry.partition("\t")
        mode, kind, blob = meta.split(" ")
        if kind == "blob" and path in paths:
            entries[path] = (mode, blob)
    contents = git.read_blobs(worktree, [blob for _, blob in entries.values()])
    files = {path: contents[blob].decode("utf-8", "replace") for path, (_, blob) in entries.items()}
    return files, entries


_read: dict[tuple[Path, str, frozenset[str]], SeedCopies] = {}
"""Seed copies read before, by (object store, seed commit, tasks): a commit's files never
change, and the gate, the ratchet and the evaluator each ask for them (three git processes
each time, for every attempt of a task)."""
_read_lock = threading.Lock()
READ_KEPT = 64


def seed_copies(worktree: Path, sha: str, task_ids: Iterable[str]) -> SeedCopies:
    """The seed test files of ``task_ids`` as the seed commit ``sha`` has them (read once
    per repository, commit and tasks in a process: ``sha`` must then be a full sha)."""
    task_ids = list(task_ids)
    dirs = git_dirs(worktree) if is_sha(sha) else None
    key = (dirs[1], sha, frozenset(task_ids)) if dirs is not None else None
    with _read_lock:
        known = _read.get(key) if key is not None else None
    if known is None:
        known = _seed_copies(worktree, sha, task_ids)
        if key is not None:
            with _read_lock:
                if len(_read) >= READ_KEPT:
                    _read.pop(next(iter(_read)))
                _read[key] = known
    # Each caller gets dictionaries of its own (the strings and tuples are shared).
    return replace(
        known,
        tests=dict(known.tests),
        support=dict(known.support),
        entries=dict(known.entries),
    )


def _seed_copies(worktree: Path, sha: str, task_ids: Iterable[str]) -> SeedCopies:
    wanted = {slug_of(task_id) for task_id in task_ids}
    listed = git.git("ls-tree", "--name-only", sha, "tests/", cwd=worktree).splitlines()
    names: list[str] = []
    others: list[str] = []
    for path in sorted(listed):
        match = _TASK_FILE_RE.match(path.removeprefix("tests/"))
        if match:
            (names if match.group(1) in wanted else others).append(path)
    configs = [name for name, _ in _PYTEST_CONFIGS]
    found, entries = _files_and_entries_at(
        sha, [*_SUPPORT_FILES, *configs, *names, *others], worktree
    )
    # Other tasks' seed tests go beside them, not run: one may import from another
    # (``from tests.test_t001_parse import SAMPLES``), as in the worktree.
    support = {path: found[path] for path in [*_SUPPORT_FILES, *others] if path in found}
    config = None
    for name, sections in _PYTEST_CONFIGS:
        text = found.get(name)
        if text is not None and any(section in text for section in sections):
            support[name], config = text, name
            break
    tests = {path: found[path] for path in names if path in found}
    return SeedCopies(sha, tests, support, config, {p: entries[p] for p in tests})


def config_pythonpath(copies: SeedCopies) -> list[str] | None:
    """The ``pythonpath`` entries of the seed's pytest configuration (None: it sets none).

    pytest resolves them against the configuration file's directory, which for the gate is
    the private copy, so the gate puts them on ``PYTHONPATH`` resolved against the worktree.
    """
    text = copies.support.get(copies.config or "")
    if text is None:
        return None
    try:
        if copies.config == "pyproject.toml":
            pytest = tomllib.loads(text).get("tool", {}).get("pytest", {})
            options = pytest.get("ini_options", pytest) if isinstance(pytest, dict) else {}
            value = options.get("pythonpath") if isinstance(options, dict) else None
        elif copies.config in ("pytest.toml", ".pytest.toml"):
            options = tomllib.loads(text).get("pytest", {})
            value = options.get("pythonpath") if isinstance(options, dict) else None
        else:
            parser = configparser.ConfigParser(interpolation=None)
            parser.read_string(text)
            section = "tool:pytest" if copies.config == "setup.cfg" else "pytest"
            value = parser.get(section, "pythonpath", fallback=None)
    except (tomllib.TOMLDecodeError, configparser.Error, ValueError):
        return None  # pytest reports a broken configuration itself
    if isinstance(value, str):
        return shlex.split(value)
    if isinstance(value, list) and all(isinstance(entry, str) for entry in value):
        return value
    return None


def changed_seed_tests(worktree: Path, copies: SeedCopies) -> list[str]:
    """Seed test files whose worktree copy differs from the seed commit's (content or
    executable bit), or is gone, or whose index entry git was told to stop comparing
    with the file (skip-worktree, assume-unchanged) and that differs from the seed's:
    ``git add -A`` would commit that entry, not the file."""
    forged = _forged_index_entries(worktree, copies)
    # Byte for byte the seed's copy is unchanged, whatever git's filters would say: the
    # usual case costs no git process. Anything else is asked of git, filters and all.
    paths = [p for p in sorted(copies.tests) if not _same_file(worktree, p, copies)]
    if not paths:
        return forged
    listed = git.git("ls-tree", "-l", "-z", copies.sha, "--", *paths, cwd=worktree)
    seed: dict[str, tuple[str, int]] = {}  # path → (blob, size)
    for entry in filter(None, listed.split("\0")):
        meta, _, path = entry.partition("\t")
        _, _, blob, size = meta.split()
        seed[path] = (blob, int(size))
    # Hash only what has the seed's size: a changed size is a change, and a file the worker
    # made huge (sparse, so free) would keep git hashing past its timeout.
    present = [
        p for p in paths if _plain_file(worktree, p) and (worktree / p).stat().st_size == seed[p][1]
    ]
    now = git.git("hash-object", "--", *present, cwd=worktree).split() if present else []
    current = dict(zip(present, now, strict=True))
    modes = _tracks_modes(worktree)
    changed = [
        p
        for p in paths
        if current.get(p) != seed[p][0] or (modes and not _same_mode(worktree, p, copies))
    ]
    return sorted({*changed, *forged})


def _forged_index_entries(worktree: Path, copies: SeedCopies) -> list[str]:
    """Seed tests whose index entry is hidden from ``git add`` (skip-worktree: ``S``/``s``,
    assume-unchanged: lower case) and is not the seed's blob and mode."""
    if not copies.entries:
        return []
    out = git.git("ls-files", "-v", "-s", "-z", "--", *sorted(copies.entries), cwd=worktree)
    forged = []
    for record in filter(None, out.split("\0")):
        meta, _, path = record.partition("\t")
        tag, mode, blob, _ = meta.split(" ")
        hidden = tag in ("S", "s") or tag.islower()
        if hidden and path in copies.entries and (mode, blob) != copies.entries[path]:
            forged.append(path)
    return forged


def _tracks_modes(worktree: Path) -> bool:
    """Whether git records the executable bit here (``core.fileMode``, true by default)."""
    value = git.git("config", "--bool", "core.fileMode", cwd=worktree, check=False).strip()
    return value != "false"


def _same_mode(root: Path, rel: str, copies: SeedCopies) -> bool:
    """``root/rel``'s executable bit is the seed's (a mode git does not know: no opinion)."""
    mode = copies.entries.get(rel, ("", ""))[0]
    if mode not in ("100644", "100755"):
        return True
    try:
        executable = bool((root / rel).stat().st_mode & 0o100)
    except OSError:
        return False
    return executable == (mode == "100755")


def _same_file(root: Path, rel: str, copies: SeedCopies) -> bool:
    """The seed's bytes and executable bit (no git process)."""
    return _same_bytes(root, rel, copies.tests[rel]) and _same_mode(root, rel, copies)


def _same_bytes(root: Path, rel: str, text: str) -> bool:
    """``root/rel`` is a plain file holding exactly ``text`` (UTF-8). A seed copy that was
    not valid UTF-8 was read with replacement characters: never the same here (ask git)."""
    if "\ufffd" in text:
        return False
    expected = text.encode("utf-8")
    try:
        return (
            _plain_file(root, rel)
            and (root / rel).stat().st_size == len(expected)
            and read_inside(root, rel, len(expected) + 1) == expected
        )
    except OSError:
        return False


def _plain_file(root: Path, rel: str) -> bool:
    """``root/rel`` is a regular file reached through no link (a linked ``tests/`` reads the
    same but commits as a link where the seed tests were)."""
    parts = Path(rel).parts
    steps = [root.joinpath(*parts[:n]) for n in range(1, len(parts) + 1)]
    return (root / rel).is_file() and not any(step.is_symlink() for step in steps)


def tampering_message(changed: Sequence[str], sha: str) -> str:
    """What the worker reads when its diff changes a seed test."""
    restore = "; ".join(f"git show {sha[:12]}:{p} > {p}" for p in changed)
    paths = " ".join(changed)
    return (
        "REFUSED: your changes modify the seed test file(s) "
        + ", ".join(changed)
        + ". The seed tests are the contract of this task: the harness always runs the seed "
        "commit's copies, and a case whose diff changes them is not accepted. Restore them "
        f"(`{restore}`; their mode too: `chmod a-x {paths}` unless the seed made them "
        "executable; and if git's index was told to ignore them, `git update-index "
        f"--no-skip-worktree --no-assume-unchanged -- {paths}`) and make the code pass them. "
        "Write any extra tests you want in new files; they are yours to run with bash."
    )


_CONFIG_NAMES = frozenset(name for name, _ in _PYTEST_CONFIGS)
# Never linked from the worktree: what would let a worker change how the seed tests run.
_NEVER_LINKED = frozenset({"conftest.py", "__init__.py", "__pycache__", *_CONFIG_NAMES})


@contextmanager
def materialised(
    copies: SeedCopies, worktree: Path | None = None, *, configs_named: bool = False
) -> Iterator[Path]:
    """A private directory holding the seed copies (and their support files).

    With ``worktree``, the directory mirrors it: every other entry of its top level and of
    its ``tests/`` is linked in, so seed tests and conftest files that find files beside
    them (a helper module, a data directory, ``src/`` put on ``sys.path``, the repository
    root as ``Path(__file__).parents[1]``) run as they do in the worktree. Other seed
    tests, conftest files and ``__init__.py`` are never linked; nor is a file named like a
    pytest configuration, unless ``configs_named`` says the run names its configuration
    file (so pytest reads only that one, whatever the worktree holds).
    """
    skipped = _NEVER_LINKED - _CONFIG_NAMES if configs_named else _NEVER_LINKED
    with tempfile.TemporaryDirectory(prefix="tilth-seed-") as tmp:
        root = Path(tmp).resolve()
        for path, text in {**copies.support, **copies.tests}.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        if worktree is not None:
            _link_entries(worktree, root, skipped)
            tests = worktree / "tests"
            if (root / "tests").is_dir() and tests.is_dir() and not tests.is_symlink():
                _link_entries(tests, root / "tests", skipped)
        yield root


def _link_entries(source: Path, target: Path, skipped: frozenset[str]) -> None:
    """Link each entry of ``source`` into ``target`` where ``target`` has none of that name."""
    for entry in sorted(source.iterdir()):
        if entry.name in skipped or _TASK_FILE_RE.match(entry.name):
            continue
        link = target / entry.name
        if not link.exists() and not link.is_symlink():
            link.symlink_to(entry)
