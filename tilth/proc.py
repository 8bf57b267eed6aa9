"""Running child processes: a timeout, their own process group, killed with their children."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcResult:
    """What a finished (or killed) child produced."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False


def kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the child's whole process group (it leads its own)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run(
    cmd: Sequence[str] | str,
    *,
    cwd: Path | str | None = None,
    timeout: float = 60.0,
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
    shell: bool = False,
) -> ProcResult:
    """Run ``cmd`` to completion; on timeout kill its process group and report it."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        shell=shell,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(input=input_text, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        return ProcResult(proc.returncode if proc.returncode is not None else -9, out, err, True)
    except BaseException:
        kill_group(proc)
        proc.wait()
        raise
    return ProcResult(proc.returncode, out, err)
