"""Named pipes left in a worktree: git would wait on them for ever, so Tilth removes them.

git opens files by name while it walks a worktree (every ``.gitignore`` and
``.gitattributes``, the ``HEAD`` of a repository nested in it), and opening a FIFO
with no writer blocks. One ``mkfifo .gitignore`` made every later ``git status`` and
``git add`` of Tilth's hang until its timeout, run after run. A FIFO holds no content
git could commit, so after each command that ran the worker's code the worktree is
swept.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def remove_named_pipes(root: Path) -> list[str]:
    """Delete every FIFO under ``root`` (links are not followed); their relative paths."""
    removed: list[str] = []
    pending = [str(root)]
    while pending:
        try:
            entries = os.scandir(pending.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif not entry.is_file(follow_symlinks=False) and not entry.is_symlink():
                    # Neither file, directory nor link: only now is a stat worth its cost.
                    try:
                        if stat.S_ISFIFO(os.lstat(entry.path).st_mode):
                            os.unlink(entry.path)
                            removed.append(os.path.relpath(entry.path, root))
                    except OSError:
                        continue
    return sorted(removed)


def removal_note(removed: list[str]) -> str:
    """The line the model reads after a command that left FIFOs."""
    shown = ", ".join(removed[:5]) + (f" and {len(removed) - 5} more" if len(removed) > 5 else "")
    return (
        f"[harness] removed named pipe(s) left in the workspace: {shown}. git would block on "
        "them; use a file or a pipe in /tmp instead."
    )
