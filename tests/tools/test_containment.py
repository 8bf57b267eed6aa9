"""Nothing a tool call starts outlives it, with or without a sandbox, whatever it tries."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from security.conftest import MATRIX_PARAMS, require_backend

from tilth.tools import ToolBox, landlock, launcher
from tilth.tools.sandbox import make_sandbox

ESCAPES = {
    "background": "sleep {m} &",
    "setsid": "setsid sleep {m} &",
    "nohup": "nohup sleep {m} >/dev/null 2>&1 &",
    "double fork": "(setsid sh -c 'sleep {m} &' &)",
    "disowned": "sleep {m} & disown",
}


def _sleepers(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline[:2] == [b"sleep", marker.encode()]:
            found.append(int(entry.name))
    return found


def _box(tmp_path: Path, backend: str, timeout: float = 20) -> ToolBox:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    sandbox = None if backend == "off" else make_sandbox(ws, backend=backend)
    return ToolBox(ws, sandbox=sandbox, bash_timeout=timeout)


@pytest.mark.parametrize("how", sorted(ESCAPES))
@pytest.mark.parametrize("backend", ["off", *MATRIX_PARAMS])
def test_no_process_outlives_its_call(tmp_path: Path, backend: str, how: str) -> None:
    require_backend(backend)
    marker = f"{400 + os.getpid() % 500}.{len(how)}{len(backend)}7"
    command = ESCAPES[how].format(m=marker) + "; sleep 0.3; echo started"
    try:
        outcome = _box(tmp_path, backend).dispatch("bash", {"command": command})
        assert "started" in outcome.result and not outcome.is_error, outcome.result
        assert _sleepers(marker) == [], f"{how} survived the call ({backend})"
    finally:
        for pid in _sleepers(marker):
            os.kill(pid, 9)


@pytest.mark.parametrize("backend", ["off", *MATRIX_PARAMS])
def test_a_timed_out_call_takes_its_escaped_processes_with_it(tmp_path: Path, backend: str) -> None:
    require_backend(backend)
    marker = f"{400 + os.getpid() % 500}.{len(backend)}9"
    command = f"setsid sleep {marker} & (setsid sh -c 'sleep {marker} &' &); sleep {marker}"
    try:
        outcome = _box(tmp_path, backend, timeout=1.5).dispatch("bash", {"command": command})
        assert outcome.is_error and "timed out" in outcome.result
        deadline = time.monotonic() + 5
        while _sleepers(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _sleepers(marker) == []
    finally:
        for pid in _sleepers(marker):
            os.kill(pid, 9)


def test_the_exit_status_is_the_commands(tmp_path: Path) -> None:
    box = _box(tmp_path, "off")
    assert box.dispatch("bash", {"command": "exit 7"}).result.endswith("[exit 7]")
    killed = box.dispatch("bash", {"command": "kill -9 $$"}).result
    assert killed.endswith("[exit 137]")
    missing = box.dispatch("bash", {"command": "no-such-program-xyz"}).result
    assert "[exit 127]" in missing


@pytest.mark.parametrize("backend", ["off", *MATRIX_PARAMS])
def test_the_command_holds_no_descriptor_but_its_own_three(tmp_path: Path, backend: str) -> None:
    """The launcher reports the command's status on a socket: were the command to hold it,
    it could end the call early and run on past its timeout."""
    require_backend(backend)
    box = _box(tmp_path, backend)
    for _ in range(2):  # the first call's launcher starts in the call; the second is a spare
        listing = box.dispatch("bash", {"command": "ls /proc/$$/fd; exit 5"}).result
        assert listing.split() == ["0", "1", "2", "[exit", "5]"], listing


def test_a_command_that_kills_its_launcher_does_not_hang_the_call(tmp_path: Path) -> None:
    outcome = _box(tmp_path, "off").dispatch("bash", {"command": "kill -9 $PPID; sleep 30"})
    assert not outcome.is_error and outcome.result.endswith("[exit -9]"), outcome.result


def test_each_calls_launcher_is_reaped_and_few_are_kept_ready(tmp_path: Path) -> None:
    """A call ends on its launcher's report, before the launcher's exit: it is reaped after."""
    box = _box(tmp_path, "off")
    launchers = []
    for _ in range(4):
        outcome = box.dispatch("bash", {"command": "echo $PPID"})
        launchers.append(int(outcome.result.split()[0]))
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in launchers):  # a zombie has its entry
        assert time.monotonic() < deadline, "a finished call's launcher was never reaped"
        time.sleep(0.05)
    while len(launcher.spares()) < launcher.SPARES and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(launcher.spares()) == launcher.SPARES


def test_under_landlock_the_command_cannot_kill_its_launcher(tmp_path: Path) -> None:
    """Killing its launcher would orphan what the command started with ``setsid``: only
    the launcher's spawning thread is confined, so (ABI >= 6) the command's signal to its
    launcher is refused and the call ends with nothing left behind."""
    require_backend("landlock")
    if landlock.abi_version() < 6:
        pytest.skip("this kernel's Landlock ABI < 6 does not scope signals (doctor says so)")
    marker = f"{400 + os.getpid() % 500}.66"
    command = f"setsid sleep {marker} & kill -9 $PPID; echo kill-rc=$?"
    try:
        outcome = _box(tmp_path, "landlock").dispatch("bash", {"command": command})
        assert "kill-rc=1" in outcome.result and not outcome.is_error, outcome.result
        assert _sleepers(marker) == [], "the setsid'd sleep outlived its call"
    finally:
        for pid in _sleepers(marker):
            os.kill(pid, 9)
