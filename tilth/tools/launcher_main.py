"""The launcher program: ``python -I -S launcher_main.py``, started ahead of the call it runs.

It waits on the socket it was given (``$TILTH_LAUNCHER_FD``) for one job — the command, its
environment and directory, how to confine it, and its output descriptors — then becomes a
child subreaper, confines itself (Landlock) and spawns the command, waits for it, kills
whatever it left, puts back the files it may not change, reports the command's status on
the socket and exits with it. End of input without a job: it exits quietly.

It imports nothing from Tilth but ``landlock.py`` (loaded by path), and is started with
an empty environment: no key is in its memory for the command to look for.
"""

from __future__ import annotations

import ctypes
import importlib.util
import marshal
import os
import signal
import socket
import stat
import sys
import threading
from types import ModuleType
from typing import Any

_PR_SET_CHILD_SUBREAPER, _PR_SET_DUMPABLE = 36, 4
JOB_BYTES = 4 << 20


def _landlock() -> ModuleType:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "landlock.py")
    spec = importlib.util.spec_from_file_location("tilth_launcher_landlock", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (see ``tilth.proc.children``)."""
    found: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as handle:
                found += [int(word) for word in handle.read().split()]
        return found
    except (OSError, ValueError):
        pass
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if len(fields) > 1 and fields[1] == str(pid):
                found.append(int(name))
    return found


def main() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    landlock = _landlock()  # loaded before the job arrives: off the call's critical path
    channel = socket.socket(fileno=int(os.environ["TILTH_LAUNCHER_FD"]))
    channel.set_inheritable(False)  # the command never holds it: it cannot report for us
    try:
        data, fds, _, _ = socket.recv_fds(channel, JOB_BYTES, 2)
    except OSError:
        return 0  # Tilth exited: no job will come
    if not data or len(fds) != 2:
        return 0
    job: dict[str, Any] = marshal.loads(data)
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(job["cwd"])
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    env: dict[str, str] = job["env"]
    tmp: str | None = job["tmp"]  # made by Tilth before, removed by Tilth after the call
    if tmp is not None:
        cache = os.path.join(tmp, ".cache")
        env.update(TMPDIR=tmp, HOME=tmp, XDG_CACHE_HOME=cache, XDG_CONFIG_HOME=tmp)
    ruleset = None
    if job["ruleset"] is not None:
        spec = job["ruleset"]
        grants = tuple(landlock.Grant(p, r, f) for p, r, f in spec["grants"])
        ruleset = landlock.Ruleset(grants, spec["abi"], spec["network"])
    argv: list[str] = job["argv"]
    # The launcher holds nothing the command may not see (an empty environment, the
    # command's job) and is not dumpable, so the command (without capabilities) cannot
    # trace it. Only a thread of it is confined, and spawns the command (without a fork of
    # its own): Landlock and capabilities are per thread, so the launcher's own thread
    # stays outside the command's domain, where (ABI >= 6) no signal from the command
    # reaches it — killing its launcher would orphan what the command left running.
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    started: dict[str, Any] = {}

    def spawn() -> None:
        try:
            if ruleset is not None:
                landlock.confine(ruleset, [tmp] if tmp else [])
            started["pid"] = os.posix_spawnp(
                argv[0], argv, env, setsigdef=(signal.SIGPIPE, signal.SIGXFSZ)
            )
        except OSError as exc:
            started["error"] = exc

    if ruleset is None:
        spawn()
    else:
        confined = threading.Thread(target=spawn)
        confined.start()
        confined.join()
    if "error" in started:
        os.write(2, f"tilth: could not start {argv[0]}: {started['error']}\n".encode())
        return 127
    pid = started["pid"]
    code = _reap(pid)
    _restore([(p, bytes.fromhex(h)) for p, h in job["keep"]])
    try:  # the call is over: Tilth need not wait for this process to exit
        channel.send(code.to_bytes(4, "little", signed=True))
    except OSError:
        pass
    return code


def _reap(main: int) -> int:
    """Wait for the command; then kill and reap every process left; the command's status."""
    status: int | None = None
    while status is None:
        try:
            pid, raw = os.waitpid(-1, 0)
        except ChildProcessError:
            return 126
        if pid == main:
            status = raw
    # Orphans are re-parented here. Only while some still run is /proc read for them.
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid:
            continue
        for child in children(os.getpid()):
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def _restore(kept: list[tuple[str, bytes]]) -> None:
    """Put back each kept file the command changed, replaced or removed."""
    for path, data in kept:
        try:
            if not os.path.islink(path):
                with open(path, "rb") as handle:
                    if handle.read(len(data) + 1) == data:
                        continue
        except OSError:
            pass
        try:  # in place first: where the directory is carved out, nothing can be made
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
        except OSError:
            fd = -1
        try:
            if fd < 0:
                if os.path.isdir(path) and not os.path.islink(path):
                    _remove(path)
                elif os.path.lexists(path):
                    os.unlink(path)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        except OSError:
            continue


def _remove(path: str) -> None:
    """Delete a directory tree, links not followed (everything that wrote to it is dead)."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        entries = []
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                _remove(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            continue
    try:
        os.chmod(path, stat.S_IRWXU)
        os.rmdir(path)
    except OSError:
        pass


if __name__ == "__main__":
    os._exit(main())  # no interpreter teardown: the caller is waiting for this exit
