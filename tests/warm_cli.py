"""Start Tilth commands as real processes without paying for Python's start each time.

A warm server process imports Tilth and what its commands load (httpx, prompt_toolkit, the
web app) and then forks a child per command. The child takes the standard streams the test
made (pipes, files or a pseudo-terminal, passed over a Unix socket), its own environment,
directory and arguments, and becomes what ``python -m tilth <args>`` would be: a session of
its own when asked, the exit code or signal its own. Tests drive it through ``WarmProcess``,
which answers like ``subprocess.Popen``. A child asked to be a ``terminal`` session takes its
standard input, a pseudo-terminal, as its controlling terminal (as a shell's child does), so
Ctrl-C typed there, a resize or a hang-up reaches it: ``tests/chat/tty.py`` drives
``tilth chat`` so.

The server's command line ends in a file named ``tilth`` (a link to this one), so the
product's own check of a lock holder (``tilth ...`` or ``python -m tilth ...``) sees a
Tilth process, as it would for the real command.

Protocol, one JSON message per SOCK_SEQPACKET datagram, each with an ``id``:
``{"start": job}`` plus three file descriptors → ``{"pid": n}``;
``{"wait": pid}`` → ``{"code": exit code, or -signal}``, sent once the child has exited.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn

PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
Stream = int | IO[Any] | None
"""Where a child's stream goes: ``PIPE``, ``DEVNULL``, a file descriptor or a file."""


# ---- the server (its own process) ---------------------------------------------------------
def _text_stream(fd: int, mode: str) -> io.TextIOWrapper:
    """A standard stream as a fresh interpreter makes it (line-buffered on a terminal)."""
    interactive = os.isatty(fd)
    raw = io.FileIO(fd, mode, closefd=False)
    buffered: Any = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    errors = "backslashreplace" if fd == 2 else "strict"
    return io.TextIOWrapper(
        buffered, "utf-8", errors, line_buffering=interactive or fd == 2, write_through=fd == 2
    )


def _become(job: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: take the job's streams, session, directory and environment."""
    if job["new_session"]:
        os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    if job.get("terminal"):
        import fcntl
        import termios

        fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # its session's terminal, this group in front
    os.closerange(3, 65536)  # the server's socket and every other descriptor: as new
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    sys.stdin = sys.__stdin__ = _text_stream(0, "r")
    sys.stdout = sys.__stdout__ = _text_stream(1, "w")
    sys.stderr = sys.__stderr__ = _text_stream(2, "w")


def _child(job: dict[str, Any], fds: list[int]) -> NoReturn:
    """Run the job in this (forked) process, then end as the interpreter would."""
    _become(job, fds)
    _leave(_run(job))


def _run(job: dict[str, Any]) -> int:
    """The job's exit status, as ``python -m tilth`` (or ``python -c``) would end with it."""
    try:
        if job["code"] is not None:
            sys.argv = ["-c", *job["argv"]]
            exec(compile(job["code"], "<string>", "exec"), {"__name__": "__main__"})
            return 0
        import tilth
        from tilth.cli import main

        sys.argv = [str(Path(tilth.__file__).with_name("__main__.py")), *job["argv"]]
        return main(job["argv"])
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        traceback.print_exc()
        _leave(-signal.SIGINT)  # what an uncaught Ctrl-C ends a Python process with
    except BaseException:
        traceback.print_exc()
        return 1


def _leave(code: int) -> NoReturn:
    """End as the interpreter does (threads joined, ``atexit`` run, output flushed) but
    without tearing down every module: that would touch, and so copy, the whole heap
    this process shares with the server, a fifth of a second each time."""
    threading._shutdown()  # type: ignore[attr-defined]  # the interpreter's own first step
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception as exc:  # the interpreter reports it and exits with 120
            os.write(2, f"Exception ignored in: {stream!r}\n{exc!r}\n".encode())
            code = code or 120
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


WARM_MODULES = (
    "tilth.model.openai_client",
    "tilth.agent.resume",
    "tilth.agent.loop",
    "tilth.runner",
    "tilth.seed.interview",
    "tilth.health.doctor",
    "tilth.demo.story",
    "tilth.ui.chat.view",
    "tilth.web.app",
    "prompt_toolkit",
)


def serve(channel: socket.socket) -> None:
    """The server loop: start children, report their exits."""
    import gc
    import importlib

    import click

    from tilth.cli import cli

    for module in WARM_MODULES:  # what the commands import when they run
        importlib.import_module(module)
    gc.collect()
    gc.freeze()  # the children's collections never touch (so never copy) what was loaded

    context = click.Context(cli)
    for name in cli.list_commands(context):
        cli.get_command(context, name)  # imports each command's module
    codes: dict[int, int] = {}
    waiting: dict[int, list[int]] = {}
    select = selectors.DefaultSelector()
    select.register(channel, selectors.EVENT_READ, None)

    def reply(message: dict[str, Any]) -> None:
        channel.send(json.dumps(message).encode())

    while True:
        for key, _ in select.select():
            if key.data is not None:  # a child's pidfd: it exited
                pid = key.data
                select.unregister(key.fileobj)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                codes[pid] = os.waitstatus_to_exitcode(status)
                for ident in waiting.pop(pid, []):
                    reply({"id": ident, "code": codes[pid]})
                continue
            data, fds, _, _ = socket.recv_fds(channel, 1 << 20, 3)
            if not data:
                return  # the client is gone
            request = json.loads(data)
            if "start" in request:
                pid = os.fork()
                if pid == 0:
                    select.close()
                    _child(request["start"], fds)
                for fd in fds:
                    os.close(fd)
                select.register(os.pidfd_open(pid), selectors.EVENT_READ, pid)
                reply({"id": request["id"], "pid": pid})
            else:
                pid = request["wait"]
                if pid in codes:
                    reply({"id": request["id"], "code": codes[pid]})
                else:
                    waiting.setdefault(pid, []).append(request["id"])


# ---- the client (in the test process) -----------------------------------------------------
class WarmProcess:
    """A command started by the warm server, answering like ``subprocess.Popen``."""

    def __init__(self, cli: WarmCli, pid: int, args: list[str], streams: list[IO[Any] | None]):
        self._cli = cli
        self.pid = pid
        self.args = args
        self.stdin, self.stdout, self.stderr = streams
        self.returncode: int | None = None
        self._asked: int | None = None

    def _exited(self, timeout: float | None) -> int | None:
        """The exit status once the server reports it (asked once), None before ``timeout``."""
        if self.returncode is None:
            if self._asked is None:
                self._asked = self._cli._ask_later({"wait": self.pid})
            answer = self._cli._answer(self._asked, timeout)
            self.returncode = None if answer is None else answer["code"]
        return self.returncode

    def poll(self) -> int | None:
        return self._exited(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._exited(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(15)

    def kill(self) -> None:
        self.send_signal(9)

    def communicate(
        self, input: str | None = None, timeout: float | None = None
    ) -> tuple[str, str]:
        """``Popen.communicate`` for text pipes: feed stdin, read both outputs, wait."""
        done: dict[str, str] = {}

        def drain(name: str, stream: IO[str] | None) -> None:
            done[name] = stream.read() if stream is not None and not stream.closed else ""

        readers = [
            threading.Thread(target=drain, args=(name, stream), daemon=True)
            for name, stream in (("out", self.stdout), ("err", self.stderr))
        ]
        for reader in readers:
            reader.start()
        if self.stdin is not None and not self.stdin.closed:
            try:
                if input:
                    self.stdin.write(input)
                self.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.wait()
            raise
        finally:
            for reader in readers:
                reader.join(30)
        return done.get("out", ""), done.get("err", "")

    def __enter__(self) -> WarmProcess:
        return self

    def __exit__(self, *_: object) -> None:
        for stream in (self.stdin, self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        if self.poll() is None:
            self.kill()
        self.wait()


@dataclass
class Started:
    process: WarmProcess
    stdout: Path
    stderr: Path


class WarmCli:
    """A client of one warm server (a context manager; ``shared()`` gives the process's)."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="tilth-warm-"))
        named = self.tmp / "tilth"  # what the lock-holder check looks for
        named.symlink_to(Path(__file__).resolve())
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen(
            [sys.executable, str(named), str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        theirs.close()
        self.channel = ours
        self.count = 0
        self._lock = threading.Lock()
        self._heard = threading.Condition()
        self._answers: dict[int, dict[str, int]] = {}
        self._closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def __enter__(self) -> WarmCli:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _read(self) -> None:
        while True:
            try:
                data = self.channel.recv(1 << 16)
            except OSError:
                data = b""
            with self._heard:
                if not data:
                    self._closed = True
                    self._heard.notify_all()
                    return
                message = json.loads(data)
                self._answers[message.pop("id")] = message
                self._heard.notify_all()

    def _ask_later(self, request: dict[str, Any], fds: Sequence[int] = ()) -> int:
        with self._lock:
            self.count += 1
            ident = self.count
            payload = json.dumps({"id": ident, **request}).encode()
            socket.send_fds(self.channel, [payload], list(fds))
        return ident

    def _answer(self, ident: int, timeout: float | None) -> dict[str, int] | None:
        with self._heard:
            self._heard.wait_for(lambda: ident in self._answers or self._closed, timeout)
            if ident in self._answers:
                return self._answers[ident]
            assert not self._closed, "the warm CLI server died"
            return None

    def popen(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path | str | None = None,
        stdin: Stream = DEVNULL,
        stdout: Stream = None,
        stderr: Stream = None,
        start_new_session: bool = False,
        code: str | None = None,
        terminal: bool = False,
    ) -> WarmProcess:
        """``tilth <argv>`` (or ``python -c code <argv>``) as a new process, like ``Popen``
        with ``text=True``; with ``terminal``, a session whose controlling terminal is
        ``stdin`` (a pseudo-terminal's descriptor)."""
        passed: list[int] = []
        ours: list[IO[Any] | None] = []
        for n, where in enumerate((stdin, stdout, stderr)):
            theirs, mine = _child_end(n, where)
            passed.append(theirs)
            ours.append(mine)
        job = {
            "argv": list(argv),
            "env": dict(env),
            "cwd": str(cwd or os.getcwd()),
            "code": code,
            "new_session": start_new_session or terminal,
            "terminal": terminal,
        }
        try:
            answer = self._answer(self._ask_later({"start": job}, passed), 60)
        finally:
            for fd in passed:  # the child has its own copies now
                os.close(fd)
        assert answer is not None, "the warm CLI server did not start the command"
        return WarmProcess(self, answer["pid"], ["tilth", *argv], ours)

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path | str | None = None,
        input_text: str | None = "",
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        """``subprocess.run(..., capture_output=True, text=True)`` for ``tilth <argv>``."""
        process = self.popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=PIPE if input_text is not None else DEVNULL,
            stdout=PIPE,
            stderr=PIPE,
        )
        with process:
            out, err = process.communicate(input_text, timeout)
        return subprocess.CompletedProcess(process.args, process.wait(), out, err)

    def start(self, argv: list[str], env: dict[str, str], code: str | None = None) -> Started:
        """``tilth <argv>`` (or ``python -c code <argv>``) with its output in files."""
        out, err = (tempfile.NamedTemporaryFile(dir=self.tmp, delete=False) for _ in "12")
        with out, err:
            process = self.popen(argv, env=env, stdout=out, stderr=err, code=code)
        return Started(process, Path(out.name), Path(err.name))

    def wait(self, started: Started) -> tuple[int, str, str]:
        """(exit code or -signal, stdout, stderr) once ``started`` ended."""
        code = started.process.wait()
        return code, started.stdout.read_text(), started.stderr.read_text()

    def close(self) -> None:
        try:
            self.channel.shutdown(socket.SHUT_RDWR)  # wakes the reader; the server sees EOF
        except OSError:
            pass
        self.channel.close()
        self.process.wait(timeout=30)
        shutil.rmtree(self.tmp, ignore_errors=True)  # the server's link and the captured output


def _child_end(n: int, where: Stream) -> tuple[int, IO[Any] | None]:
    """The descriptor the child gets for stream ``n``, and the test's end of a pipe."""
    if where == PIPE:
        read, write = os.pipe()
        if n == 0:
            return read, open(write, "w", encoding="utf-8")
        return write, open(read, encoding="utf-8", errors="replace")
    if where == DEVNULL or (where is None and n == 0):
        return os.open(os.devnull, os.O_RDWR), None
    if where is None:
        return os.dup(n), None  # inherit the test's own stream
    if isinstance(where, int):
        return os.dup(where), None
    return os.dup(where.fileno()), None


_SHARED: list[WarmCli] = []


def shared() -> WarmCli:
    """This process's warm server, started on first use and stopped at exit."""
    if not _SHARED:
        _SHARED.append(WarmCli())
        atexit.register(_SHARED[0].close)
    return _SHARED[0]


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
