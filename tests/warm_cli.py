"""Start Tilth commands as real processes without paying for Python's start each time.

``WarmCli`` keeps one server process that has imported Tilth; each command is a ``fork`` of it
with its own environment, arguments and output files, so it can be killed (the fault tests'
``TILTH_FAULT_AT`` SIGKILLs itself) and its exit status is the process's own. Nothing runs in
the server but imports, so a child starts as a fresh ``python -m tilth`` would, a few hundred
milliseconds sooner.

Protocol (one JSON object per line): ``{"start": {...job}}`` → ``{"pid": n}``;
``{"wait": pid}`` → ``{"code": exit code, or -signal}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any


def _child(job: dict[str, Any]) -> int:
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, job["stdout"]), (2, job["stderr"])):
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, fd)
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    code = 1
    try:
        if job.get("code"):
            sys.argv = ["-c", *job["argv"]]
            exec(compile(job["code"], "<warm-cli>", "exec"), {"__name__": "__main__"})
            code = 0
        else:
            from tilth.cli import main

            code = main(job["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return code


def serve() -> None:
    """The server loop: read requests from stdin, answer on stdout."""
    import click

    import tilth.agent.resume  # noqa: F401 - warm: what the commands import
    from tilth.cli import cli

    context = click.Context(cli)
    for name in cli.list_commands(context):
        cli.get_command(context, name)  # imports each command's module
    for line in sys.stdin:
        request = json.loads(line)
        if "start" in request:
            pid = os.fork()
            if pid == 0:
                os._exit(_child(request["start"]))
            reply: dict[str, int] = {"pid": pid}
        else:
            _, status = os.waitpid(request["wait"], 0)
            reply = {"code": os.waitstatus_to_exitcode(status)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


@dataclass
class Started:
    pid: int
    stdout: Path
    stderr: Path


class WarmCli:
    """A client of one warm server (a context manager)."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="tilth-warm-"))
        self.count = 0
        self.process = subprocess.Popen(
            [sys.executable, __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def __enter__(self) -> WarmCli:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _ask(self, request: dict[str, Any]) -> dict[str, int]:
        stdin: IO[str] | None = self.process.stdin
        assert stdin is not None and self.process.stdout is not None
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, "the warm CLI server died"
        return dict(json.loads(answer))

    def start(self, argv: list[str], env: dict[str, str], code: str | None = None) -> Started:
        """``tilth <argv>`` (or ``python -c code <argv>``) in a new process with ``env``."""
        self.count += 1
        out, err = self.tmp / f"{self.count}.out", self.tmp / f"{self.count}.err"
        job = {"argv": argv, "env": env, "code": code, "cwd": os.getcwd()}
        job.update(stdout=str(out), stderr=str(err))
        return Started(self._ask({"start": job})["pid"], out, err)

    def wait(self, started: Started) -> tuple[int, str, str]:
        """(exit code or -signal, stdout, stderr) once ``started`` ended."""
        code = self._ask({"wait": started.pid})["code"]
        return code, started.stdout.read_text(), started.stderr.read_text()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)


if __name__ == "__main__":
    serve()
