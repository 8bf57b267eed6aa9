"""The launcher every worker command starts through: nothing it starts outlives the call.

``Launcher.child`` gives the function ``Popen`` runs in its forked child (``preexec_fn``)
in place of the exec. That child — the launcher — never returns: it becomes a *child
subreaper* (``PR_SET_CHILD_SUBREAPER``), so every process the command leaves behind,
``setsid``, ``nohup`` and double forks included, is re-parented to it rather than to
init; it forks the command, which confines itself (Landlock, when the ruleset says so)
and execs; when the command exits the launcher kills whatever is left, empties the
call's private temporary directory, puts back the files the command may not change,
and exits with the command's status.

No second interpreter starts: one would cost tens of milliseconds per call. The
launcher runs already-loaded code only (no import, no logging, no lock another thread
could hold), and closes every inherited descriptor first — ``Popen``'s error pipe
among them, so the caller is not kept waiting.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tilth.proc import children
from tilth.tools import landlock

_PR_SET_CHILD_SUBREAPER = 36
_LIBC = ctypes.CDLL(None, use_errno=True) if os.name == "posix" else None


@dataclass(frozen=True)
class Launcher:
    """How one command starts and ends (see the module docstring)."""

    ruleset: landlock.Ruleset | None = None
    """Landlock confinement for the command (None: contained, not confined)."""
    private_tmp: bool = False
    """Give the command a fresh ``TMPDIR`` (also ``HOME`` and the caches), removed after."""
    keep: tuple[Path, ...] = ()
    """Small regular files put back as they were if the command changed them (a
    worktree's ``.git`` file, which names the repository Tilth commits to)."""

    def child(self, argv: Sequence[str], env: Mapping[str, str] | None) -> Callable[[], None]:
        """The ``preexec_fn`` that runs ``argv`` with ``env`` under this launcher."""
        args = [str(a) for a in argv]
        environ = dict(os.environ if env is None else env)
        kept = tuple((str(p), data) for p, data in _snapshots(self.keep))
        ruleset, private = self.ruleset, self.private_tmp

        def launch() -> None:
            _launch(args, environ, ruleset, private, kept)

        return launch


def _snapshots(paths: Sequence[Path]) -> list[tuple[Path, bytes]]:
    found = []
    for path in paths:
        try:
            if path.is_file() and not path.is_symlink() and path.stat().st_size < 65536:
                found.append((path, path.read_bytes()))
        except OSError:
            continue
    return found


def _launch(
    argv: list[str],
    env: dict[str, str],
    ruleset: landlock.Ruleset | None,
    private_tmp: bool,
    kept: tuple[tuple[str, bytes], ...],
) -> None:
    """The launcher's life (in Popen's child): never returns."""
    code = 126
    try:
        os.closerange(3, _max_fd())
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        tmp = tempfile.mkdtemp(prefix="tilth-call-") if private_tmp else None
        if tmp is not None:
            cache = os.path.join(tmp, ".cache")
            env.update(TMPDIR=tmp, HOME=tmp, XDG_CACHE_HOME=cache, XDG_CONFIG_HOME=tmp)
        pid = os.fork()
        if pid == 0:
            _command(argv, env, ruleset, tmp)
        code = _reap(pid)
        _restore(kept)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        os._exit(code)


def _command(
    argv: list[str], env: dict[str, str], ruleset: landlock.Ruleset | None, tmp: str | None
) -> None:
    """The command's side of the fork: confine, then exec (never returns)."""
    try:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        if ruleset is not None:
            landlock.confine(ruleset, [tmp] if tmp else [])
        os.execvpe(argv[0], argv, env)
    except BaseException as exc:  # report in the command's output: there is no one else
        try:
            os.write(2, f"tilth: could not start {argv[0]}: {exc}\n".encode())
        finally:
            os._exit(127)


def _reap(main: int) -> int:
    """Wait for the command; then kill and reap every process left; the command's status."""
    status: int | None = None
    while True:
        try:
            pid, raw = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if pid == main:
            status = raw
        if status is not None:
            for child in children(os.getpid()):
                try:
                    os.kill(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    if status is None:
        return 126
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def _restore(kept: tuple[tuple[str, bytes], ...]) -> None:
    for path, data in kept:
        try:
            with open(path, "rb") as handle:
                if handle.read(65537) == data and not os.path.islink(path):
                    continue
        except OSError:
            pass
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            elif os.path.lexists(path):
                os.unlink(path)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        except OSError:
            continue


def _max_fd() -> int:
    try:
        return min(os.sysconf("SC_OPEN_MAX"), 1 << 20)
    except (OSError, ValueError):
        return 65536


CONTAINED = Launcher()
"""No confinement: only containment (``TILTH_SANDBOX=off``, and around bubblewrap)."""
