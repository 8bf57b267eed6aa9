"""Running child processes: a timeout, their own process group, killed with their children."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol


class Launch(Protocol):
    """How a child starts when not by ``Popen`` itself (``tilth.tools.launcher.Launcher``:
    through a launcher that ends what the command leaves, and may confine it)."""

    def start(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | str | None,
        env: Mapping[str, str] | None,
        stdout: BinaryIO | int,
        stderr: BinaryIO | int,
    ) -> subprocess.Popen[bytes]: ...

    def wait(self, proc: subprocess.Popen[bytes], timeout: float) -> int | None:
        """The command's exit status once every process it started is gone, or None when
        ``timeout`` seconds pass first (``proc`` itself may still be exiting)."""

    def finish(self, proc: subprocess.Popen[bytes]) -> None:
        """After the call: remove what it was lent, and reap ``proc`` (it has exited or
        is about to)."""


@dataclass(frozen=True)
class ProcResult:
    """What a finished (or killed) child produced."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False


def scrubbed_env(environ: Mapping[str, str], secrets: Iterable[str] = ()) -> dict[str, str]:
    """``environ`` without API keys, Tilth's own settings, or any value equal to a secret."""
    hidden = {s for s in secrets if s}
    return {
        key: value
        for key, value in environ.items()
        if not key.upper().endswith("_API_KEY")
        and not key.upper().startswith("TILTH_")
        and value not in hidden
    }


def kill_group(proc: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's whole process group (it leads its own)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` right now."""
    found: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as handle:
                found += [int(word) for word in handle.read().split()]
        return found
    except (OSError, ValueError):
        pass
    # A kernel without CONFIG_PROC_CHILDREN: every process's parent, one by one.
    return found + processes_with(PARENT, pid)


PARENT, GROUP = 1, 2
"""Fields of ``/proc/<pid>/stat`` after the command name: the parent, the process group."""


def processes_with(field: int, value: int) -> list[int]:
    """The live processes whose ``/proc/<pid>/stat`` ``field`` (``PARENT``, ``GROUP``) is
    ``value`` (Linux; none elsewhere)."""
    found: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > field and fields[field] == str(value):
            found.append(int(name))
    return found


def kill_tree(pid: int, rounds: int = 50) -> None:
    """SIGKILL every descendant of ``pid`` (not ``pid`` itself), those that left its
    process group included; a subreaper ``pid`` adopts the orphans of each round."""
    for _ in range(rounds):
        found: list[int] = []
        todo = [pid]
        while todo:
            below = children(todo.pop())
            found += below
            todo += below
        if not found:
            return
        for child in found:
            try:
                os.kill(child, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)


_YEAR = 365 * 24 * 3600.0


def wait_exit(proc: subprocess.Popen[str] | subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait for the child to exit, at most ``timeout`` seconds; True when it did.

    ``Popen.wait(timeout=...)`` polls with sleeps of up to 50 ms, which every gate and
    every ``bash`` call would pay after its command ended. A pidfd wakes up as the child
    exits; where there is none (not Linux, or an old kernel), the polling wait.
    """
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        # (capped: select cannot wait past a year, and no child is given that long)
        ready, _, _ = select.select([fd], [], [], min(max(timeout, 0), _YEAR))
    finally:
        os.close(fd)
    if not ready:
        return proc.poll() is not None
    proc.wait()
    return True


DRAIN_SECONDS = 1.0
"""How long to wait for the pipes to close after the group was killed. A killed group closes
them at once; only a process that left the group keeps them open, and waiting longer for it
only delays the caller."""
LINGER_SECONDS = 1.0
"""After the child exits, how long processes it left behind may keep its pipes open."""
POLL_SECONDS = 0.25


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", "replace")


def _drain(proc: subprocess.Popen[str], timed_out: subprocess.TimeoutExpired) -> tuple[str, str]:
    """Collect what the killed child wrote; never wait on a descendant that left the group.

    A process that called ``setsid`` (a daemon a test started, say) survives the group
    kill and keeps the pipes open; waiting for their EOF would wait for it to exit.
    """
    try:
        return proc.communicate(timeout=DRAIN_SECONDS)
    except subprocess.TimeoutExpired as again:
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        proc.wait()
        out = again.stdout if again.stdout is not None else timed_out.stdout
        err = again.stderr if again.stderr is not None else timed_out.stderr
        return _text(out), _text(err)


def run(
    cmd: Sequence[str] | str,
    *,
    cwd: Path | str | None = None,
    timeout: float = 60.0,
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
    shell: bool = False,
    errors: str = "replace",
    finish_on_interrupt: float = 0.0,
    started: Callable[[int], object] | None = None,
    before_kill: Callable[[int], object] | None = None,
) -> ProcResult:
    """Run ``cmd`` to completion; on timeout kill its process group and report it.

    ``errors="surrogateescape"`` keeps bytes that are not UTF-8 (file names) exact, both
    ways, as ``os.fsdecode`` does. On Ctrl-C (or any exception) the child is killed, after
    being let finish for up to ``finish_on_interrupt`` seconds: a git killed mid-write
    leaves its ``index.lock`` behind, and every later git command there fails on it.
    ``started`` hears the child's pid (its process group's id) as it starts; ``before_kill``
    hears it just before a child still running is killed (timed out or interrupted), while
    what the group holds open can still be seen.
    """
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors=errors,
        shell=shell,
        start_new_session=True,
    )
    try:
        if started is not None:
            started(proc.pid)
        return _wait(proc, input_text, time.monotonic() + timeout, before_kill)
    except BaseException:
        try:
            if finish_on_interrupt:
                _let_finish(proc, finish_on_interrupt)
            if before_kill is not None and proc.poll() is None:
                before_kill(proc.pid)
        finally:  # a second Ctrl-C while it finishes still ends it
            kill_group(proc)
            proc.wait()
        raise


def _let_finish(proc: subprocess.Popen[str], seconds: float) -> None:
    """Wait up to ``seconds`` for the child to end, reading its pipes so it cannot block."""
    try:
        proc.communicate(timeout=seconds)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        pass


def _wait(
    proc: subprocess.Popen[str],
    input_text: str | None,
    deadline: float,
    before_kill: Callable[[int], object] | None = None,
) -> ProcResult:
    """Collect the child's output until it is done, or kill its group at ``deadline``.

    "Done" is the child's exit plus EOF on its pipes. Background processes it left
    running keep the pipes open; after ``LINGER_SECONDS`` they are killed and the
    child's own exit code is reported, rather than waiting for them until the deadline
    (not when feeding stdin: then only the deadline ends the wait).
    """
    if input_text is not None:
        # communicate() cannot resume feeding stdin after a timeout, so no polling here.
        try:
            out, err = proc.communicate(
                input=input_text, timeout=max(deadline - time.monotonic(), 0.001)
            )
            return ProcResult(proc.returncode, out, err)
        except subprocess.TimeoutExpired as exc:
            if before_kill is not None:
                before_kill(proc.pid)
            kill_group(proc)
            out, err = _drain(proc, exc)
            return ProcResult(
                proc.returncode if proc.returncode is not None else -9, out, err, True
            )
    exited_at: float | None = None
    while True:
        step = min(deadline - time.monotonic(), POLL_SECONDS)
        try:
            out, err = proc.communicate(timeout=max(step, 0.001))
            return ProcResult(proc.returncode, out, err)
        except subprocess.TimeoutExpired as exc:
            now = time.monotonic()
            if proc.poll() is not None:
                exited_at = exited_at if exited_at is not None else now
                if now - exited_at >= LINGER_SECONDS:
                    kill_group(proc)
                    out, err = _drain(proc, exc)
                    return ProcResult(proc.returncode, out, err)
            if now >= deadline:
                if before_kill is not None:
                    before_kill(proc.pid)
                kill_group(proc)
                out, err = _drain(proc, exc)
                code = proc.returncode if proc.returncode is not None else -9
                return ProcResult(code, out, err, True)


CAPPED_CHARS = 50_000
"""What ``run_capped`` keeps of each stream: this many characters from its start and as
many from its end."""


def run_capped(
    cmd: Sequence[str],
    *,
    cwd: Path | str | None = None,
    timeout: float = 60.0,
    env: Mapping[str, str] | None = None,
    keep: int = CAPPED_CHARS,
    launch: Launch | None = None,
) -> ProcResult:
    """``run`` for a child whose output the worker controls (its code, its tests).

    A program can write gigabytes within any timeout; held in memory that would take
    Tilth down. Here stdout and stderr go to files and only both ends of each are read.
    Whatever the child left in its process group is killed when it exits.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        code, timed_out = run_into(
            cmd, stdout=out, stderr=err, cwd=cwd, timeout=timeout, env=env, launch=launch
        )
        return ProcResult(code, read_ends(out, keep), read_ends(err, keep), timed_out)


def run_into(
    cmd: Sequence[str],
    *,
    stdout: BinaryIO,
    stderr: BinaryIO | int,
    cwd: Path | str | None = None,
    timeout: float = 60.0,
    env: Mapping[str, str] | None = None,
    launch: Launch | None = None,
) -> tuple[int, bool]:
    """Run ``cmd`` with its output going to files (never pipes: a grandchild left in the
    background holding one open cannot keep the caller waiting); ``(exit code, timed
    out)``. Its whole process group is killed when it exits or times out; with
    ``launch``, every process it started, wherever it went."""
    if launch is not None:
        return _run_launched(cmd, launch, stdout, stderr, cwd, timeout, env)
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
    )
    timed_out = True
    try:
        timed_out = not wait_exit(proc, timeout)
    finally:
        kill_group(proc)
        proc.wait()
    return proc.returncode, timed_out


def _run_launched(
    cmd: Sequence[str],
    launch: Launch,
    stdout: BinaryIO,
    stderr: BinaryIO | int,
    cwd: Path | str | None,
    timeout: float,
    env: Mapping[str, str] | None,
) -> tuple[int, bool]:
    """``run_into`` through ``launch``: the call ends when the launcher reports that the
    command and all it started are gone, without waiting for the launcher's own exit."""
    proc = launch.start(cmd, cwd=cwd, env=env, stdout=stdout, stderr=stderr)
    status: int | None = None
    try:
        status = launch.wait(proc, timeout)
    finally:
        if status is None:  # timed out (or interrupted)
            # The launcher is a subreaper: what left the group is still below it.
            kill_tree(proc.pid)
            wait_exit(proc, DRAIN_SECONDS)
            kill_group(proc)
            proc.wait()
        else:  # nothing is left below a launcher that reported; one killed left its group
            kill_group(proc)
        launch.finish(proc)
    if status is None:
        return proc.returncode, True
    return status, False


def read_ends(handle: BinaryIO, keep: int) -> str:
    """A file's text: all of it, or its first and last ``keep`` characters and a note."""
    size = os.fstat(handle.fileno()).st_size
    handle.seek(0)
    if size <= keep * 8:  # a UTF-8 character is at most 4 bytes: both ends fit
        return handle.read().decode("utf-8", errors="replace")
    head = handle.read(keep * 4).decode("utf-8", errors="replace")[:keep]
    handle.seek(size - keep * 4)
    tail = handle.read().decode("utf-8", errors="replace")[-keep:]
    return f"{head}\n... [truncated: {size} bytes in all] ...\n{tail}"
