"""The repository a verb works in (``prep-feature``, ``run``): a git root, never a session's
own worktree."""

from __future__ import annotations

from pathlib import Path

from tilth import git
from tilth.errors import WorkspaceError
from tilth.session import is_session_id


def ensure_repository(workspace: Path) -> Path:
    """``workspace`` as a git repository's root; raises ``WorkspaceError`` otherwise.

    A session's own worktree is refused too: its repository is the user's, one level up.
    """
    root = git.ensure_repo(workspace)
    branch = git.current_branch(root) or ""
    session_id = branch.removeprefix("session/")
    main = git.main_worktree(root) if branch.startswith("session/") else None
    if main is not None and is_session_id(session_id):
        raise WorkspaceError(
            f"{root} is the worktree of Tilth session {session_id}, not your repository",
            hint=f"give your repository instead: {main}; or continue that session with "
            f"`tilth resume {session_id}`",
        )
    return root


def has_uncommitted_changes(repository: Path) -> bool:
    """True when the repository's working tree differs from its last commit."""
    return git.is_dirty(repository)
