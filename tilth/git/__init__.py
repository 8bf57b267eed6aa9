"""Git: one wrapper around its CLI (repo.py), the options that keep it inert (env.py), refs
read from files (refs.py) and the sessions' worktrees (worktrees.py).

``from tilth import git`` then ``git.head(...)``: the names below load on first use
(``tilth.faces``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilth.faces import lazy_face

if TYPE_CHECKING:
    from tilth.git.env import INERT as INERT
    from tilth.git.env import UNSIGNED as UNSIGNED
    from tilth.git.env import inert_env as inert_env
    from tilth.git.env import inert_options as inert_options
    from tilth.git.env import sign_commits as sign_commits
    from tilth.git.repo import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
    from tilth.git.repo import FALLBACK_EMAIL as FALLBACK_EMAIL
    from tilth.git.repo import FALLBACK_NAME as FALLBACK_NAME
    from tilth.git.repo import LARGEST_FILE as LARGEST_FILE
    from tilth.git.repo import STASH_REF_PREFIX as STASH_REF_PREFIX
    from tilth.git.repo import SUBMODULE_HEADS_ONLY as SUBMODULE_HEADS_ONLY
    from tilth.git.repo import Commit as Commit
    from tilth.git.repo import add_all as add_all
    from tilth.git.repo import ask as ask
    from tilth.git.repo import changed_paths as changed_paths
    from tilth.git.repo import clean_fd as clean_fd
    from tilth.git.repo import commit_all as commit_all
    from tilth.git.repo import commits_apart as commits_apart
    from tilth.git.repo import commits_between as commits_between
    from tilth.git.repo import current_branch as current_branch
    from tilth.git.repo import delete_ref as delete_ref
    from tilth.git.repo import diff_and_numstat as diff_and_numstat
    from tilth.git.repo import diff_with_untracked as diff_with_untracked
    from tilth.git.repo import ensure_repo as ensure_repo
    from tilth.git.repo import git as git
    from tilth.git.repo import head as head
    from tilth.git.repo import identity_args as identity_args
    from tilth.git.repo import is_ancestor as is_ancestor
    from tilth.git.repo import is_dirty as is_dirty
    from tilth.git.repo import main_worktree as main_worktree
    from tilth.git.repo import ok as ok
    from tilth.git.repo import paths_between as paths_between
    from tilth.git.repo import read_blobs as read_blobs
    from tilth.git.repo import reset_hard as reset_hard
    from tilth.git.repo import reset_paths as reset_paths
    from tilth.git.repo import reset_soft as reset_soft
    from tilth.git.repo import rev_parse as rev_parse
    from tilth.git.repo import scratch_index as scratch_index
    from tilth.git.repo import stash as stash
    from tilth.git.repo import stash_ref as stash_ref
    from tilth.git.repo import subject as subject

__getattr__, __dir__ = lazy_face(__name__, __file__)
