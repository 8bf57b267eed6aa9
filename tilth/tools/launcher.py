"""The launcher every worker command starts through: nothing it starts outlives the call.

``Launcher.start`` hands the command to a launcher process (``launcher_main.py``), which
becomes a *child subreaper* (``PR_SET_CHILD_SUBREAPER``) — every process the command
leaves behind, ``setsid``, ``nohup`` and double forks included, is re-parented to it
rather than to init — confines itself (Landlock, when the ruleset says so) and spawns the
command; when that exits it kills whatever is left, puts back the files the command may
not change and exits with the command's status; ``finish`` then removes the call's
private temporary directory. To the caller it is the command's process: wait for it,
time it out, kill its tree (``tilth.proc.kill_tree``).

Launchers are started one call ahead, with an empty environment, so a call pays neither
an interpreter's start nor a fork of Tilth's own (large) process: on a busy virtual
machine either costs tens of milliseconds. The next launcher starts when a call is
finished, not while its command runs (on two cores it would slow the command by
milliseconds); a model turn separates two calls.
"""

from __future__ import annotations

import marshal
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from tilth.tools import landlock

MAIN = Path(__file__).with_name("launcher_main.py")


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

    def start(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | str | None,
        env: Mapping[str, str] | None,
        stdout: BinaryIO | int,
        stderr: BinaryIO | int,
    ) -> subprocess.Popen[bytes]:
        """The launcher process running ``argv``; its exit status is the command's."""
        tmp = tempfile.mkdtemp(prefix="tilth-call-") if self.private_tmp else None
        job = {
            "argv": [str(a) for a in argv],
            "env": dict(os.environ if env is None else env),
            "cwd": str(cwd if cwd is not None else os.getcwd()),
            "tmp": tmp,
            "keep": [(str(p), data.hex()) for p, data in _snapshots(self.keep)],
            "ruleset": _ruleset_job(self.ruleset),
        }
        out = stdout if isinstance(stdout, int) else stdout.fileno()
        err = out if stderr == subprocess.STDOUT else _fileno(stderr)
        proc, channel = _take()
        try:
            socket.send_fds(channel, [marshal.dumps(job)], [out, err])
        finally:
            channel.close()
        if tmp is not None:
            _lent[proc.pid] = tmp
        return proc

    def finish(self, proc: subprocess.Popen[bytes]) -> None:
        """Remove the call's private temporary directory (its processes are gone); start
        the next call's launcher."""
        tmp = _lent.pop(proc.pid, None)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        # Only now: an interpreter starting while the command runs takes a core from it.
        threading.Thread(target=prestart, name="tilth-launcher", daemon=True).start()


_lent: dict[int, str] = {}
"""Private temporary directories by launcher pid, until the call is finished."""


def _fileno(stream: BinaryIO | int) -> int:
    return stream if isinstance(stream, int) else stream.fileno()


def _ruleset_job(ruleset: landlock.Ruleset | None) -> dict[str, Any] | None:
    if ruleset is None:
        return None
    grants = [(g.path, g.rights, g.follow) for g in ruleset.grants]
    return {"grants": grants, "abi": ruleset.abi, "network": ruleset.network}


def _snapshots(paths: Sequence[Path]) -> list[tuple[Path, bytes]]:
    found = []
    for path in paths:
        try:
            if path.is_file() and not path.is_symlink() and path.stat().st_size < 65536:
                found.append((path, path.read_bytes()))
        except OSError:
            continue
    return found


_lock = threading.Lock()
_spare: tuple[subprocess.Popen[bytes], socket.socket] | None = None


def _spawn() -> tuple[subprocess.Popen[bytes], socket.socket]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(MAIN)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(theirs.fileno(),),
            env={"TILTH_LAUNCHER_FD": str(theirs.fileno())},
            start_new_session=True,
            close_fds=True,
        )
    finally:
        theirs.close()
    ours.set_inheritable(False)
    return proc, ours


def _take() -> tuple[subprocess.Popen[bytes], socket.socket]:
    """The spare launcher (a fresh one if it died); ``finish`` starts the next spare."""
    global _spare
    with _lock:
        taken = _spare if _spare is not None and _spare[0].poll() is None else None
        if taken is None and _spare is not None:
            _spare[1].close()
        _spare = None
    return taken if taken is not None else _spawn()


def prestart() -> None:
    """Start the spare launcher now, so the first call does not wait for it."""
    global _spare
    with _lock:
        if _spare is None or _spare[0].poll() is not None:
            _spare = _spawn()


def _forget() -> None:
    """In a forked child: the parent's spare is not this process's to use."""
    global _spare, _lock
    _lock = threading.Lock()  # another thread may have held it at the fork
    if _spare is not None:
        _spare[1].close()
    _spare = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)

CONTAINED = Launcher()
"""No confinement: only containment (``TILTH_SANDBOX=off``, and around bubblewrap)."""
