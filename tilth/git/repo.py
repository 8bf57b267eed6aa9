"""One wrapper around the git CLI. Every call has a timeout and raises ``GitError``.

Tilth only writes to the session's own branch and worktree; nothing here
touches the source repository's working tree, index or other refs.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tilth import proc
from tilth.errors import GitError, WorkspaceError
from tilth.git import locks
from tilth.git.env import inert_env, inert_options
from tilth.git.refs import branch_from_files, git_dirs, head_from_files

FALLBACK_NAME = "Tilth"
FALLBACK_EMAIL = "tilth@localhost"
DEFAULT_TIMEOUT = 120.0
INTERRUPT_GRACE = 5.0
"""How long a git command may finish after a stop (Ctrl-C, the web UI's stop) before it is
killed: one killed while it writes the index leaves ``index.lock``, and the resumed run's
first commit fails on it."""


def git(
    *args: str,
    cwd: Path,
    check: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    env: dict[str, str] | None = None,
    input_text: str | None = None,
    started: Callable[[int], object] | None = None,
) -> str:
    """Run ``git <args>`` in ``cwd`` and return stdout; raise ``GitError`` on failure.

    A git killed (on its timeout, or not finished within ``INTERRUPT_GRACE`` of a stop)
    has its lock files removed (``locks``); ``started`` hears its pid as it starts."""
    cmd = ["git", *args]  # as shown in errors; the INERT options are always added
    run = ["git", *inert_options(), *args]
    held: list[locks.HeldLock] = []
    try:
        # Paths that are not UTF-8 come back (and go in) exactly, as os.fsdecode has them.
        result = proc.run(
            run,
            cwd=cwd,
            timeout=timeout,
            env=inert_env(env),
            input_text=input_text,
            errors="surrogateescape",
            finish_on_interrupt=INTERRUPT_GRACE,
            started=started,
            before_kill=lambda group: held.extend(locks.held_locks(group)),
        )
    finally:
        removed = locks.remove_left(held) if held else []
    if result.timed_out:
        left = f"; removed the lock it left: {', '.join(map(str, removed))}" if removed else ""
        raise GitError(cmd, -9, f"timed out after {timeout:.0f}s{left}")
    if check and result.returncode != 0:
        raise GitError(cmd, result.returncode, result.stderr or result.stdout)
    return result.stdout


def ask(*args: str, cwd: Path) -> proc.ProcResult:
    """``git <args>`` run inert, its result as it is (no exit status is an error here)."""
    argv = ["git", *inert_options(), *args]
    return proc.run(
        argv,
        cwd=cwd,
        timeout=DEFAULT_TIMEOUT,
        env=inert_env(),
        finish_on_interrupt=INTERRUPT_GRACE,
    )


def ok(*args: str, cwd: Path) -> bool:
    """True when ``git <args>`` exits 0."""
    return ask(*args, cwd=cwd).returncode == 0


# ---- repository checks -------------------------------------------------------------------
def ensure_repo(path: Path, *, require_commit: bool = True) -> Path:
    """The resolved top-level of the repository at ``path``, with actionable errors.

    ``require_commit=False`` accepts a repository without commits yet (``tilth doctor``).
    """
    path = path.expanduser()
    if not path.exists():
        raise WorkspaceError(
            f"{path} does not exist", hint="give the directory of your project's git repository"
        )
    if not path.is_dir():
        raise WorkspaceError(
            f"{path} is not a directory", hint="give the directory of your project's git repository"
        )
    path = path.resolve()
    # One process answers all three: bare or not, the top level, HEAD's commit (if any).
    questions = ["--is-bare-repository", "--show-toplevel", "--verify", "--quiet", "HEAD^{commit}"]
    asked = ask("rev-parse", *questions, cwd=path)
    answers = asked.stdout.splitlines()
    if answers[:1] == ["true"]:
        raise WorkspaceError(
            f"{path} is a bare repository (it has no working tree to build on)",
            hint=f"clone it and pass the clone: git clone {path} <dir> && tilth prep-feature <dir>",
        )
    if len(answers) < 2 or asked.returncode not in (0, 1):
        raise WorkspaceError(
            f"{path} is not a git repository",
            hint=f'run `git init -b main && git add -A && git commit -m "initial"` in {path}',
        )
    top = Path(answers[1]).resolve()
    if top != path:
        raise WorkspaceError(
            f"{path} is inside the repository {top}, not its top level",
            hint=f"pass the repository root: {top}",
        )
    if require_commit and (asked.returncode != 0 or len(answers) < 3):
        raise WorkspaceError(
            f"{path} has no commits yet",
            hint='make a first commit: git add -A && git commit -m "initial"',
        )
    return path


def main_worktree(cwd: Path) -> Path | None:
    """The repository's main working tree when ``cwd`` is a linked worktree, else None."""
    out = git("rev-parse", "--git-dir", "--git-common-dir", cwd=cwd, check=False).splitlines()
    if len(out) != 2:
        return None
    git_dir, common = ((cwd / line).resolve() for line in out)
    return None if git_dir == common else common.parent


def head(cwd: Path) -> str:
    """The full sha of HEAD: read from the ref files when ``cwd`` is a worktree's top level
    (no process), else (or when that fails: reftable, a symbolic chain) asked of git."""
    try:
        sha = head_from_files(cwd)
    except (OSError, IndexError, UnicodeDecodeError):
        sha = None
    return sha or git("rev-parse", "HEAD", cwd=cwd).strip()


def rev_parse(rev: str, cwd: Path) -> str | None:
    """The full sha of ``rev``, or None when it does not resolve to a commit."""
    out = ask("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", cwd=cwd)
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def current_branch(cwd: Path) -> str | None:
    """The branch HEAD is on, or None when HEAD is detached: read from the HEAD file when
    ``cwd`` is a worktree's top level (no process), else asked of git."""
    try:
        known, branch = branch_from_files(cwd)
    except (OSError, UnicodeDecodeError):
        known, branch = False, None
    if known:
        return branch
    out = git("symbolic-ref", "-q", "--short", "HEAD", cwd=cwd, check=False).strip()
    return out or None


def is_ancestor(ancestor: str, descendant: str, cwd: Path) -> bool:
    """True when ``ancestor`` is reachable from ``descendant``."""
    return ok("merge-base", "--is-ancestor", ancestor, descendant, cwd=cwd)


Commit = tuple[str, str]
"""``(sha, subject)``."""


def commits_between(base: str, tip: str, cwd: Path) -> list[Commit]:
    """``(sha, subject)`` of commits in ``base..tip``, newest first."""
    out = git("log", "--format=%H%x09%s", f"{base}..{tip}", cwd=cwd)
    pairs = (line.partition("\t") for line in out.splitlines())
    return [(sha, subject) for sha, tab, subject in pairs if tab]


def commits_apart(left: str, right: str, cwd: Path) -> tuple[list[Commit], list[Commit]]:
    """``(only in left, only in right)``: ``commits_between(right, left)`` and
    ``commits_between(left, right)`` from one walk, newest first."""
    out = git("log", "--left-right", "--format=%m%H%x09%s", f"{left}...{right}", "--", cwd=cwd)
    sides: dict[str, list[Commit]] = {"<": [], ">": []}
    for line in out.splitlines():
        sha, tab, subject = line[1:].partition("\t")
        if tab and line[:1] in sides:
            sides[line[:1]].append((sha, subject))
    return sides["<"], sides[">"]


def subject(rev: str, cwd: Path) -> str:
    """The subject line of ``rev``."""
    return git("log", "-1", "--format=%s", rev, cwd=cwd).strip()


# ---- identity and commits ------------------------------------------------------------------
def identity_args(cwd: Path) -> list[str]:
    """``-c`` options supplying Tilth's identity where the repository configures none."""
    found = git("config", "--get-regexp", r"^user\.(name|email)$", cwd=cwd, check=False)
    values: dict[str, str] = {}
    for line in found.splitlines():
        key, _, value = line.partition(" ")
        values[key.lower()] = value.strip()  # the last one wins, as for `git config KEY`
    args: list[str] = []
    if not values.get("user.name"):
        args += ["-c", f"user.name={FALLBACK_NAME}"]
    if not values.get("user.email"):
        args += ["-c", f"user.email={FALLBACK_EMAIL}"]
    return args


# ---- nested repositories -----------------------------------------------------------------
SUBMODULE_HEADS_ONLY = "--ignore-submodules=dirty"
"""For commands comparing the working tree: a submodule counts as changed when its commit
moved, never by asking git *inside* it about its files. That git would read the nested
repository's own config, which the worker can write (``git init`` in the worktree), and
run the filter or other commands it names, outside the sandbox."""


LARGEST_FILE = 100 * 1024 * 1024
"""Bytes: a bigger file is never staged by Tilth. git hashes about 200 MB a second, and a
sparse file of any size costs the worker nothing to make: one of 20 GB kept every commit,
diff and rewind past git's timeout."""


def add_all(cwd: Path, env: dict[str, str] | None = None) -> list[str]:
    """``git add -A``, except files over ``LARGEST_FILE`` (returned, so callers can say so),
    and without ever running git inside a submodule (see ``SUBMODULE_HEADS_ONLY``).

    ``git add`` has no option for that, so submodules are left out of its pathspec and
    their entries set here: the commit their checkout is on (read from its files), or
    removed when the directory is gone.
    """
    hidden, changed = _listing(cwd, env)
    _unhide_entries(cwd, env, hidden)
    links = _gitlinks(cwd, env)
    # Unhidden entries compare with their files again: any of them may be changed now.
    large = _too_large(cwd, changed | set(hidden))
    if not links and not large:
        git("add", "-A", cwd=cwd, env=env)
        return []
    spec = "".join(f":(exclude,literal){path}\0" for path in [*links, *large])
    git(
        "add",
        "-A",
        "--pathspec-from-file=-",
        "--pathspec-file-nul",
        cwd=cwd,
        env=env,
        input_text=".\0" + spec,
    )
    for path, recorded in links.items():
        where = cwd / path
        if (where / ".git").exists():
            try:
                now = head_from_files(where)
            except (OSError, IndexError, UnicodeDecodeError):
                now = None
            if now and now != recorded:
                git("update-index", "--cacheinfo", f"160000,{now},{path}", cwd=cwd, env=env)
        elif not where.exists() and not where.is_symlink():
            git("update-index", "--force-remove", "--", path, cwd=cwd, env=env)
        else:  # no longer a repository: what is there is ordinary content
            literal = {**(env or {}), "GIT_LITERAL_PATHSPECS": "1"}
            git("add", "-A", "--", path, cwd=cwd, env=literal)
    return large


def _listing(cwd: Path, env: dict[str, str] | None) -> tuple[list[str], set[str]]:
    """One ``git ls-files`` for ``add_all``: the index entries git was told not to compare
    with their files (``--assume-unchanged``, ``--skip-worktree``) whose files exist, and
    the untracked (not ignored) or changed paths."""
    out = git(
        "ls-files",
        "-v",
        "-z",
        "--cached",
        "--others",
        "--modified",
        "--exclude-standard",
        cwd=cwd,
        env=env,
    )
    hidden: list[str] = []
    changed: set[str] = set()
    for record in filter(None, out.split("\0")):
        tag, _, path = record.partition(" ")
        if tag in ("?", "C", "c"):  # untracked; changed (or deleted) since the index
            changed.add(path)
        elif (tag in ("S", "s") or tag.islower()) and os.path.lexists(cwd / path):
            hidden.append(path)
    return hidden, changed


def _unhide_entries(cwd: Path, env: dict[str, str] | None, hidden: list[str]) -> None:
    """Stage from the file, like any other, an entry git was told not to compare with it
    (``--assume-unchanged``, ``--skip-worktree``): ``git add -A`` would otherwise commit
    whatever that entry holds, which no gate ran and no reviewer saw. An entry whose file
    is absent (a sparse checkout) is left as it is (``_listing`` leaves it out)."""
    if hidden:
        paths = "\0".join(hidden) + "\0"
        # One flag per call: update-index applies only the last of several such options.
        for flag in ("--no-assume-unchanged", "--no-skip-worktree"):
            git("update-index", flag, "-z", "--stdin", cwd=cwd, env=env, input_text=paths)


def _too_large(cwd: Path, candidates: set[str]) -> list[str]:
    """Those of ``candidates`` (untracked or changed files) over ``LARGEST_FILE``."""
    large = []
    for rel in sorted(candidates):
        try:
            found = os.lstat(cwd / rel)
        except OSError:
            continue
        if stat.S_ISREG(found.st_mode) and found.st_size > LARGEST_FILE:
            large.append(rel)
    return large


def _index_file(cwd: Path) -> Path | None:
    """The index of the worktree whose top level is ``cwd``, from its files (no process);
    None when they do not say."""
    dirs = git_dirs(cwd)
    return dirs[0] / "index" if dirs is not None and dirs[0].is_dir() else None


_GITLINK_MODE = (0o160000).to_bytes(4, "big")
"""How an index entry stores a submodule's mode (32 bits, big-endian, in every version)."""


def _surely_no_gitlinks(cwd: Path, env: dict[str, str] | None) -> bool:
    """True when the index file proves it records no submodule: its bytes nowhere hold a
    gitlink's mode. (A match may be chance; then git is asked. A split index keeps entries
    in another file, so it is always asked too.)"""
    given = (env or {}).get("GIT_INDEX_FILE")
    where = Path(given) if given is not None else _index_file(cwd)
    if where is None:
        return False
    try:
        found = os.stat(where)
    except FileNotFoundError:
        return True  # no index yet: nothing staged at all
    except OSError:
        return False
    if not stat.S_ISREG(found.st_mode) or found.st_size > LARGEST_FILE:
        return False  # never wait on a FIFO or read a huge file: git knows what it is
    try:
        data = where.read_bytes()
    except OSError:
        return False
    return data[:4] == b"DIRC" and _GITLINK_MODE not in data and b"link" not in data


def _gitlinks(cwd: Path, env: dict[str, str] | None) -> dict[str, str]:
    """Submodule entries of the index: path → the commit it records."""
    if _surely_no_gitlinks(cwd, env):
        return {}
    out = git("ls-files", "-s", "-z", cwd=cwd, env=env)
    links: dict[str, str] = {}
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        if meta.startswith("160000 "):
            links[path] = meta.split(" ")[1]
    return links


def commit_all(cwd: Path, message: str, *, allow_empty: bool = False) -> str | None:
    """Stage everything and commit; returns the new sha, or None if nothing to commit."""
    add_all(cwd)
    if not allow_empty and ok("diff", "--cached", "--quiet", cwd=cwd):
        return None  # nothing staged
    extra = ["--allow-empty"] if allow_empty else []
    git(*identity_args(cwd), "commit", "--no-verify", "-q", *extra, "-m", message, cwd=cwd)
    return head(cwd)


def is_dirty(cwd: Path) -> bool:
    """True when the worktree has uncommitted or untracked (non-ignored) changes."""
    return bool(git("status", "--porcelain", SUBMODULE_HEADS_ONLY, cwd=cwd).strip())


def changed_paths(cwd: Path) -> set[str]:
    """Paths that differ from HEAD in the worktree: tracked changes and untracked files.

    One walk of the whole worktree (``git status``): its cost follows the repository's size.
    """
    out = git(
        "status",
        "--porcelain",
        "-z",
        "--untracked-files=all",
        "--no-renames",
        "--ignore-submodules",
        cwd=cwd,
    )
    return {item[3:] for item in out.split("\0") if len(item) > 3}


def paths_between(cwd: Path, old: str, new: str) -> set[str]:
    """Files that differ between two commits (a tree diff: its cost follows the change)."""
    if old == new:
        return set()
    out = git("diff", "--name-only", "-z", "--no-renames", old, new, cwd=cwd)
    return {p for p in out.split("\0") if p}


def read_blobs(cwd: Path, shas: list[str]) -> dict[str, bytes]:
    """The contents of blobs by sha, through one ``git cat-file --batch``."""
    wanted = sorted(set(shas))
    if not wanted:
        return {}
    cmd = ["git", *inert_options(), "cat-file", "--batch"]
    try:
        done = subprocess.run(
            cmd,
            cwd=cwd,
            env=inert_env(),
            input="".join(f"{sha}\n" for sha in wanted).encode(),
            capture_output=True,
            timeout=DEFAULT_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise GitError(cmd[:1] + cmd[5:], -9, "timed out") from None
    if done.returncode != 0:
        raise GitError(cmd[:1] + cmd[5:], done.returncode, done.stderr.decode("utf-8", "replace"))
    blobs: dict[str, bytes] = {}
    out, at = done.stdout, 0
    for sha in wanted:
        end = out.index(b"\n", at)
        header = out[at:end].split(b" ")
        if len(header) != 3:
            raise GitError(cmd[:1] + cmd[5:], 1, f"blob {sha} is missing")
        size = int(header[2])
        blobs[sha] = out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1
    return blobs


def reset_paths(cwd: Path, rev: str, paths: set[str]) -> None:
    """Set the index entries of ``paths`` to ``rev``'s (removed where ``rev`` has none);
    HEAD, the worktree and every other entry stay as they are (no refresh, no walk)."""
    if paths:
        git(
            "reset",
            "-q",
            "--no-refresh",
            rev,
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
            cwd=cwd,
            input_text="".join(f"{path}\0" for path in sorted(paths)),
            env={"GIT_LITERAL_PATHSPECS": "1"},
        )


@contextmanager
def scratch_index(cwd: Path) -> Iterator[dict[str, str]]:
    """Env that points git at a throwaway copy of ``cwd``'s index; the real one is never touched.

    The copy keeps the index's modification time. Git trusts a file's cached stat only when
    the file is older than the index that recorded it; a copy stamped "now" would make a
    same-size rewrite in the same clock tick as the last ``git add`` look unchanged, and
    ``git add -A`` would keep the old content.
    """
    real = _index_file(cwd) or Path(git("rev-parse", "--git-path", "index", cwd=cwd).strip())
    if not real.is_absolute():
        real = cwd / real
    with tempfile.TemporaryDirectory(prefix="tilth-index-") as tmp:
        index = Path(tmp) / "index"
        if real.exists():
            shutil.copy2(real, index)
        yield {"GIT_INDEX_FILE": str(index)}


def diff_with_untracked(cwd: Path, base: str = "HEAD", *, stat: bool = False) -> str:
    """Diff of the working tree (untracked files included) against ``base``; its
    ``--numstat`` with ``stat``.

    Uses a throwaway index so the worktree's own index is never modified.
    """
    (out,) = _worktree_diffs(cwd, base, ("--numstat",) if stat else ())
    return out


def diff_and_numstat(cwd: Path, base: str = "HEAD") -> tuple[str, str]:
    """``diff_with_untracked`` and its ``--numstat``, from one staging of the working tree."""
    diff, numstat = _worktree_diffs(cwd, base, (), ("--numstat",))
    return diff, numstat


def _worktree_diffs(cwd: Path, base: str, *variants: tuple[str, ...]) -> list[str]:
    """``git diff --cached <variant> base`` for each variant, the working tree staged once
    into a throwaway index; a full diff names the files left out as too large."""
    with scratch_index(cwd) as env:
        left_out = add_all(cwd, env)
        plain = ["diff", "--cached", "--no-color", "--no-ext-diff"]
        outs = [git(*plain, *variant, base, cwd=cwd, env=env) for variant in variants]
    limit = LARGEST_FILE // 2**20
    note = "".join(f"# left out (over {limit} MB, never committed): {p}\n" for p in left_out)
    return [
        out if "--numstat" in variant else out + note
        for out, variant in zip(outs, variants, strict=True)
    ]


def reset_hard(cwd: Path, rev: str) -> None:
    """``git reset --hard <rev>``."""
    git("reset", "-q", "--hard", rev, cwd=cwd)


def reset_soft(cwd: Path, rev: str) -> None:
    """``git reset --soft <rev>``: move the branch, keep the changes staged."""
    git("reset", "-q", "--soft", rev, cwd=cwd)


def clean_fd(cwd: Path) -> None:
    """``git clean -fd``: untracked files go, ignored files stay."""
    git("clean", "-q", "-fd", cwd=cwd)


STASH_REF_PREFIX = "refs/tilth/stash/"


def stash_ref(name: str) -> str:
    """The Tilth-owned ref that keeps stashed changes of ``name`` (a session id)."""
    return STASH_REF_PREFIX + name


def delete_ref(cwd: Path, ref: str) -> bool:
    """Delete ``ref`` (a full ref name) and its reflog; False when it did not exist."""
    if not ok("show-ref", "--verify", "--quiet", ref, cwd=cwd):
        return False
    git("update-ref", "-d", ref, cwd=cwd)
    return True


def stash(cwd: Path, message: str, *, ref: str) -> bool:
    """Save uncommitted changes (untracked included) as a commit on ``ref``, then drop them.

    Never ``git stash``: a worktree shares ``refs/stash`` with the user's repository, and
    Tilth must not touch the user's refs. Each save moves ``ref`` (its reflog keeps the
    earlier ones); get the changes back with ``git cherry-pick --no-commit <ref>``.
    False when there was nothing to save.
    """
    if not is_dirty(cwd):
        return False
    with scratch_index(cwd) as env:
        add_all(cwd, env)
        tree = git("write-tree", cwd=cwd, env=env).strip()
    commit = git(
        *identity_args(cwd), "commit-tree", tree, "-p", "HEAD", "-m", message, cwd=cwd
    ).strip()
    git("update-ref", "--create-reflog", "-m", message, ref, commit, cwd=cwd)
    reset_hard(cwd, "HEAD")
    clean_fd(cwd)
    return True
