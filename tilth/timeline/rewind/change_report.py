"""Read-only questions a plan asks of the worktree, the event log and the threads."""

from __future__ import annotations

import itertools
import mmap
import re
from collections import Counter
from pathlib import Path

from tilth import git
from tilth.session.events import LINE_HEAD
from tilth.session.threads import Thread, message_number
from tilth.timeline.rewind.summarize import cut_at

# Anchoring the line head at a newline means a nested "type" inside a payload never
# counts, and the literal prefix lets the regex engine skip ahead with a fast search
# instead of trying every byte.
_EVENT_TYPE_RE = re.compile(rb"\n" + LINE_HEAD)
_FIRST_EVENT_RE = re.compile(LINE_HEAD)


def tree_changes(worktree: Path, target: str) -> list[tuple[str, str]]:
    """``(restore | delete, path)`` for every file a reset to ``target`` + clean would change.

    Compares the working tree *including untracked files* (ignored ones excluded,
    as ``git clean -fd`` leaves them) with ``target``.
    """
    with git.scratch_index(worktree) as env:
        git.add_all(worktree, env)
        out = git.git(
            "diff", "--cached", "--name-status", "--no-renames", "-z", target, cwd=worktree, env=env
        )
    fields = out.split("\0")
    changes: list[tuple[str, str]] = []
    for status, path in zip(fields[0::2], fields[1::2], strict=False):
        if not status:
            continue
        # Added since the target: a rewind deletes it. Anything else: it is restored.
        changes.append(("delete" if status.startswith("A") else "restore", path))
    return sorted(changes, key=lambda c: c[1])


def tally_events(path: Path, offset: int) -> dict[str, int]:
    """Count event types from byte ``offset`` to the end, without parsing JSON."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return {}
    if size <= offset:
        return {}
    counts: Counter[str] = Counter()
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        # ``offset`` is a line start: begin at the newline before it (or match line one).
        first = _FIRST_EVENT_RE.match(mm, 0) if offset == 0 else None
        rest = _EVENT_TYPE_RE.finditer(mm, max(0, offset - 1))
        for match in itertools.chain([first] if first else [], rest):
            counts[match.group("type").decode("utf-8", "replace")] += 1
    return dict(sorted(counts.items()))


def thread_drops(directory: Path, heads: dict[str, str | None]) -> tuple[dict[str, int], list[str]]:
    """Messages each thread would lose when cut to ``heads``, and threads deleted outright."""
    dropped: dict[str, int] = {}
    deleted: list[str] = []
    if not directory.is_dir():
        return dropped, deleted
    for path in sorted(directory.glob("*.jsonl")):
        key = path.stem
        if key not in heads:
            deleted.append(key)
            continue
        head = heads[key]
        stored = Thread(directory, key).read()
        # Summaries: count against the thread as it was at ``head`` (rewind.summarize).
        kept = cut_at(stored, head)
        if kept is not None:
            count = len({m.id for m in stored} - {m.id for m in kept})
        else:
            limit = message_number(head) if head else 0
            count = sum(1 for m in stored if message_number(m.id) > limit)
        if count:
            dropped[key] = count
    return dropped, deleted
