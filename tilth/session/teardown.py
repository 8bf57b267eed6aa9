"""Full teardown of a session: its worktree, its branch (and stash ref) and its directory."""

from __future__ import annotations

import shutil
from pathlib import Path

from tilth import git, git_worktrees
from tilth.errors import GitError, SessionCorrupt
from tilth.session.store import Session


def teardown(session: Session) -> list[str]:
    """Remove worktree, branch ``session/<id>``, its stash ref and the session dir; returns notes.

    Idempotent: parts already gone are reported, not treated as errors. When the
    checkpoint is unreadable the source comes from the first ``session_start``.
    """
    notes: list[str] = []
    source = recorded_source(session)
    worktree = session.workspace_dir
    if _is_chat(session):
        # A chat works in the user's own directory: no worktree, no branch, and git is
        # never run there. Only the session directory goes (a fork's own copy with it).
        if source is not None and not source.is_relative_to(session.dir):
            notes.append(f"chat session: {source} is yours and stays as it is")
    elif source is not None and (source / ".git").exists():
        if worktree.exists():
            git_worktrees.remove_worktree(source, worktree)
            notes.append(f"removed worktree {worktree}")
        else:
            git.git("worktree", "prune", cwd=source)
            notes.append("worktree already gone (pruned stale entries)")
        try:
            if git_worktrees.delete_branch(source, session.branch):
                notes.append(f"deleted branch {session.branch}")
            else:
                notes.append(f"branch {session.branch} already gone")
        except GitError as exc:
            notes.append(f"could not delete branch {session.branch}: {exc}")
        # Changes a restart stashed live on a ref of the session's own; it goes with it.
        stash = git.stash_ref(session.id)
        try:
            if git.delete_ref(source, stash):
                notes.append(f"deleted {stash}")
        except GitError as exc:
            notes.append(f"could not delete {stash}: {exc}")
    elif source is not None:
        notes.append(f"source repository {source} is gone; only the session dir is removed")
    else:
        notes.append("source repository unknown; only the session dir is removed")
    if session.dir.exists():
        shutil.rmtree(session.dir)
        notes.append(f"removed session dir {session.dir}")
    return notes


def _is_chat(session: Session) -> bool:
    try:
        return session.record().kind == "chat"
    except (SessionCorrupt, OSError):
        return any(
            event.type == "session_start" and event.payload.get("kind") == "chat"
            for event in session.events.events()
        )


def recorded_source(session: Session) -> Path | None:
    """The session's source repo: from the checkpoint, else the first ``session_start``."""
    try:
        raw = session.record().source
        if raw:
            return Path(raw)
    except (SessionCorrupt, OSError):
        pass
    for event in session.events.events():
        if event.type == "session_start" and event.payload.get("source"):
            return Path(str(event.payload["source"]))
    return None
