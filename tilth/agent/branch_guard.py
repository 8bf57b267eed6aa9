"""The session branch is the only branch: every stage commit lands on ``session/<id>``.

A worktree found detached, or on another branch, stops the run with the git
command that puts it back — never a commit that the session branch does not keep.
"""

from __future__ import annotations

from pathlib import Path

from tilth import git
from tilth.errors import WorkspaceError


class OffBranch(WorkspaceError):
    """The worktree's HEAD is not on the session branch."""

    exit_code = 1


def require_session_branch(worktree: Path, branch: str, session_id: str) -> None:
    """Raise ``OffBranch`` (with a recovery command) unless ``worktree`` is on ``branch``."""
    current = git.current_branch(worktree)
    if current == branch:
        return
    where = "a detached HEAD" if current is None else f"branch {current}"
    head = git.head(worktree)
    tip = git.rev_parse(f"refs/heads/{branch}", worktree)
    q = f"git -C {worktree}"
    if tip is not None and tip != head and git.is_ancestor(tip, head, worktree):
        ahead = len(git.commits_between(tip, head, worktree))
        fix = f"{q} checkout -B {branch}   (keeps the {ahead} commit(s) made off the branch)"
    else:
        fix = f"{q} checkout {branch}"
    raise OffBranch(
        f"the worktree of session {session_id} is on {where} ({head[:12]}), not on {branch}; "
        "Tilth commits only to the session branch, so the run stopped",
        hint=f"put it back with `{fix}`, then `tilth resume {session_id}`",
    )
