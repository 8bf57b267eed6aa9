"""The launcher every worker command starts through: nothing it starts outlives the call.

``Launcher.start`` hands the command to a launcher process (``launcher_main.py``), which
becomes a *child subreaper* (``PR_SET_CHILD_SUBREAPER``) — every process the command
leaves behind, ``setsid``, ``nohup`` and double forks included, is re-parented to it
rather than to init — confines itself (Landlock, when the ruleset says so) and spawns the
command; when that exits it kills whatever is left, puts back the files the command may
not change, reports the command's status over its socket (``wait`` returns it) and exits
with it; ``finish`` then removes the call's private temporary directory and reaps the
launcher in the background. To the caller it is the command's process: time it out,
kill its tree (``tilth.proc.kill_tree``).

Launchers are started ahead of the calls (two spares), with an empty environment, so a
call pays neither an interpreter's start nor a fork of Tilth's own (large) process: on a
busy virtual machine either costs tens of milliseconds. The next spare starts when a call
is finished, not while its command runs (on two cores it would slow the command by
milliseconds): a model turn, or the other spare, covers the time it takes to start.
"""

from __future__ import annotations

import marshal
import os
import queue
import select
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
        except BaseException:
            channel.close()
            raise
        _lent[proc.pid] = (channel, tmp)
        return proc

    def wait(self, proc: subprocess.Popen[bytes], timeout: float) -> int | None:
        """The command's status as the launcher reports it, once it has killed and reaped
        every process left (its own exit, a millisecond more, is not waited for); None
        when ``timeout`` seconds pass first."""
        channel = _lent[proc.pid][0]
        ready, _, _ = select.select([channel], [], [], min(max(timeout, 0), _YEAR))
        if not ready:
            return None
        try:
            report = channel.recv(16)
        except OSError:
            report = b""
        if len(report) == 4:
            return int.from_bytes(report, "little", signed=True)
        proc.wait()  # gone without a report: killed
        return proc.returncode

    def finish(self, proc: subprocess.Popen[bytes]) -> None:
        """Remove the call's private temporary directory (its processes are gone); reap
        the launcher and start the next call's, off the caller's path."""
        channel, tmp = _lent.pop(proc.pid)
        channel.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        # Only now: an interpreter starting while the command runs takes a core from it.
        _settle_later(proc)


_lent: dict[int, tuple[socket.socket, str | None]] = {}
"""Each running call's channel to its launcher and private temporary directory, by
launcher pid, until the call is finished."""
_YEAR = 365 * 24 * 3600.0  # select cannot wait past it, and no call is given that long


_settling: queue.SimpleQueue[subprocess.Popen[bytes]] | None = None
"""Finished calls' launchers for the settler thread (started with the first)."""


def _settle_later(proc: subprocess.Popen[bytes]) -> None:
    """Have ``proc`` reaped and the spares topped up by the settler thread (a thread
    started per call would cost the caller a tenth of a millisecond or more)."""
    global _settling
    with _lock:
        if _settling is None:
            _settling = queue.SimpleQueue()
            threading.Thread(
                target=_settle, args=(_settling,), name="tilth-launcher", daemon=True
            ).start()
        settling = _settling
    settling.put(proc)


def _settle(settling: queue.SimpleQueue[subprocess.Popen[bytes]]) -> None:
    """For each finished call: reap its launcher (it reported; it is exiting), then
    start the spares."""
    while True:
        settling.get().wait()
        if settling.empty():
            try:
                prestart()
            except OSError:
                pass  # (out of processes, say) the next call starts its own launcher


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


SPARES = 2
"""Launchers kept started: the second of two calls in a row (a model often asks for
several) finds one ready too."""
_lock = threading.Lock()
_spares: list[tuple[subprocess.Popen[bytes], socket.socket]] = []


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
    """The oldest spare launcher still alive (a fresh one if none is); ``finish`` starts
    the next spares."""
    with _lock:
        while _spares:
            proc, channel = _spares.pop(0)
            if proc.poll() is None:
                return proc, channel
            channel.close()
    return _spawn()


def prestart() -> None:
    """Start spare launchers up to ``SPARES``, so the next calls do not wait for one."""
    with _lock:
        for spare in [s for s in _spares if s[0].poll() is not None]:
            _spares.remove(spare)
            spare[1].close()
        missing = SPARES - len(_spares)
    for _ in range(missing):  # spawned outside the lock: a call may take a spare meanwhile
        spare = _spawn()
        with _lock:
            _spares.append(spare)


def spares() -> list[int]:
    """The pids of the launchers started and waiting for a call."""
    with _lock:
        return [proc.pid for proc, _ in _spares if proc.poll() is None]


def _forget() -> None:
    """In a forked child: the parent's spares are not this process's to use, and its
    settler thread is not running here."""
    global _lock, _settling
    _lock = threading.Lock()  # another thread may have held it at the fork
    _settling = None
    for _, channel in _spares:
        channel.close()
    _spares.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)

CONTAINED = Launcher()
"""No confinement: only containment (``TILTH_SANDBOX=off``, and around bubblewrap)."""
