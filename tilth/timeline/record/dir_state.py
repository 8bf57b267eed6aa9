"""A plain directory's files as the timeline sees them, without git: manifests and ignore rules.

Sessions that work directly in a directory (``tilth chat``) have no branch to anchor their
code to, and must never run git there (``git status`` alone rewrites the index). Their
checkpoints use a *manifest* instead of a commit: every captured file of the directory at
one instant, ``path → entry``, stored as one blob in the shared snapshot store. A
checkpoint's ``head`` is then ``manifest:<blob id>`` and its ``overlay`` lists the files
that differ from the manifest, exactly as a turn checkpoint's overlay lists the files that
differ from a commit.

Ignore rules follow git's as far as a plain reader can: ``.git`` and a few well-known
tool directories are always skipped, and the patterns of the top-level ``.gitignore``
(no negation, no nested files) are honoured. Ignored files are never captured, and a
rewind never touches them.
"""

from __future__ import annotations

import fnmatch
import json
import os
import stat as stat_mod
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from tilth.safe_read import try_read_text
from tilth.session.schemas import SCHEMAS
from tilth.timeline.record.blob_store import BlobStore, Entry, FileState, blob_id, make_entry

MANIFEST_PREFIX = "manifest:"
MANIFEST_SCHEMA = SCHEMAS["manifest"]
ALWAYS_SKIPPED = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
    }
)
"""Directory names skipped wherever they appear: version control and tool caches."""

Files = dict[str, Entry]


def is_manifest_head(head: str | None) -> bool:
    """True when a checkpoint's ``head`` names a manifest (a session without git)."""
    return bool(head) and str(head).startswith(MANIFEST_PREFIX)


def entry_of(state: FileState) -> Entry:
    """The entry ``state`` would be stored under (hashing only, nothing written); for a
    file read only in part (over the cap), one that no stored file has, changing with its
    size."""
    data = state.data if state.size is None else state.data + b"\0over-cap:%d" % state.size
    return make_entry(blob_id(data), state.kind)


# ---- ignore rules ---------------------------------------------------------------------------
@dataclass
class IgnoreRules:
    """Which paths of a directory are not captured (see the module docstring)."""

    patterns: list[tuple[str, bool, bool]] = field(default_factory=list)
    """``(pattern, anchored, directory only)`` from the top-level ``.gitignore``."""

    @classmethod
    def for_root(cls, root: Path) -> IgnoreRules:
        rules = cls()
        text = try_read_text(root, ".gitignore", 1 << 20)  # the chat's model writes it
        if text is None:
            return rules
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith(("#", "!")):
                continue
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            anchored = "/" in line
            line = line.lstrip("/")
            if line:
                rules.patterns.append((line, anchored, dir_only))
        return rules

    def _matches(self, rel: str, is_dir: bool) -> bool:
        name = rel.rsplit("/", 1)[-1]
        for pattern, anchored, dir_only in self.patterns:
            if dir_only and not is_dir:
                continue
            if fnmatch.fnmatchcase(rel if anchored else name, pattern):
                return True
        return False

    def ignored_dir(self, rel: str) -> bool:
        """True when the directory ``rel`` (relative, no trailing slash) is not captured."""
        return rel.rsplit("/", 1)[-1] in ALWAYS_SKIPPED or self._matches(rel, True)

    def ignored(self, rel: str) -> bool:
        """True when the path ``rel`` or one of its parent directories is not captured."""
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            if self.ignored_dir("/".join(parts[:depth])):
                return True
        return parts[-1] in ALWAYS_SKIPPED or self._matches(rel, False)


def walk_files(root: Path, rules: IgnoreRules) -> tuple[list[str], set[str]]:
    """Every captured file or symlink under ``root`` (relative), and the ignored directories."""
    files: list[str] = []
    skipped: set[str] = set()
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            entries = os.scandir(root / rel if rel else root)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        with entries:
            for entry in entries:
                child = f"{rel}/{entry.name}" if rel else entry.name
                try:
                    mode = entry.stat(follow_symlinks=False).st_mode
                except OSError:
                    continue
                if stat_mod.S_ISDIR(mode):
                    if rules.ignored_dir(child):
                        skipped.add(child)
                    else:
                        stack.append(child)
                elif (stat_mod.S_ISREG(mode) or stat_mod.S_ISLNK(mode)) and not rules._matches(
                    child, False
                ):
                    files.append(child)
    files.sort()
    return files, skipped


# ---- manifests -----------------------------------------------------------------------------
_CACHE: OrderedDict[str, Files] = OrderedDict()
_CACHE_SIZE = 4


def store_manifest(store: BlobStore, files: Files) -> str:
    """Store ``files`` as one blob; returns the ``manifest:<id>`` head naming it."""
    data = json.dumps(
        {"schema": MANIFEST_SCHEMA, "files": files}, sort_keys=True, separators=(",", ":")
    ).encode("utf-8")
    head = MANIFEST_PREFIX + store.put(data)
    _remember(head, files)
    return head


def load_manifest(store: BlobStore, head: str) -> Files:
    """The ``path → entry`` map a manifest head names (cached; raises ``SnapshotError``)."""
    cached = _CACHE.get(head)
    if cached is not None:
        _CACHE.move_to_end(head)
        return cached
    from tilth.timeline.record.blob_store import SnapshotError

    raw = store.get(head[len(MANIFEST_PREFIX) :])
    try:
        value = json.loads(raw)
        files = value["files"]
        if not isinstance(files, dict):
            raise TypeError("files is not an object")
    except (ValueError, KeyError, TypeError) as exc:
        raise SnapshotError(f"the file manifest {head[:21]} is unreadable ({exc})") from None
    _remember(head, files)
    return dict(files)


def _remember(head: str, files: Files) -> None:
    _CACHE[head] = dict(files)
    _CACHE.move_to_end(head)
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)


def manifest_blobs(store: BlobStore, head: str) -> set[str]:
    """The manifest's own blob and every blob it names (for retention's mark phase)."""
    from tilth.timeline.record.blob_store import SnapshotError, split_entry

    own = head[len(MANIFEST_PREFIX) :]
    try:
        files = load_manifest(store, head)
    except SnapshotError:
        return {own}
    return {own} | {split_entry(e)[0] for e in files.values()}


def resolve_state(store: BlobStore, head: str, overlay: dict[str, Entry | None]) -> Files:
    """The full ``path → entry`` map of (manifest head, overlay): what the directory held."""
    files = dict(load_manifest(store, head))
    for rel, entry in overlay.items():
        if entry is None:
            files.pop(rel, None)
        else:
            files[rel] = entry
    return files
