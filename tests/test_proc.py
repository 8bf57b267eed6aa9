"""Child processes: timeouts, process-group kills, and processes a command leaves behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tilth import proc


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_dead(pid: int) -> bool:
    for _ in range(100):  # an orphan is reaped by init shortly after the kill
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_output_and_exit_code() -> None:
    result = proc.run(["sh", "-c", "echo out; echo err >&2; exit 4"])
    assert (result.returncode, result.stdout, result.stderr, result.timed_out) == (
        4,
        "out\n",
        "err\n",
        False,
    )


def test_input_text_is_fed_whole(tmp_path: Path) -> None:
    big = "y" * 3_000_000
    script = "import sys, time; time.sleep(0.5); print(len(sys.stdin.read()))"
    result = proc.run(["python3", "-c", script], input_text=big, timeout=60)
    assert result.stdout.strip() == "3000000"


def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "bg.pid"
    result = proc.run(
        f"sleep 60 & echo $! > {pidfile}; echo started; wait", shell=True, timeout=1.5
    )
    assert result.timed_out and result.returncode == -9
    assert result.stdout == "started\n"
    assert wait_dead(int(pidfile.read_text()))


def test_background_leftovers_do_not_hold_the_result(tmp_path: Path) -> None:
    pidfile = tmp_path / "bg.pid"
    result = proc.run(f"sleep 60 & echo $! > {pidfile}; echo done; exit 3", shell=True, timeout=60)
    assert (result.returncode, result.timed_out, result.stdout) == (3, False, "done\n")
    assert wait_dead(int(pidfile.read_text()))  # killed with its parent's group


def test_a_process_that_left_the_group_cannot_hang_the_caller(tmp_path: Path) -> None:
    pidfile = tmp_path / "escapee.pid"
    # setsid puts the sleeper in its own group, out of reach of the group kill, with
    # our pipes still open. The call must return while it is still running.
    result = proc.run(
        f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 60' & sleep 30",
        shell=True,
        timeout=1.5,
    )
    try:
        assert result.timed_out
        pid = int(pidfile.read_text())
        assert alive(pid)
    finally:
        if pidfile.exists():
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_wait_exit_reports_an_exit_and_a_timeout() -> None:
    quick = subprocess.Popen([sys.executable, "-c", "pass"])
    assert proc.wait_exit(quick, 1e12) and quick.returncode == 0
    slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not proc.wait_exit(slow, 0.2) and slow.returncode is None
    finally:
        slow.kill()
        slow.wait()


def _waiting_in_run() -> bool:
    """The main thread is past ``Popen`` and waits for the child inside ``proc.run`` (an
    interrupt that lands in ``Popen`` itself comes before there is a child to let finish)."""
    frame = sys._current_frames().get(threading.main_thread().ident or 0)
    while frame is not None:
        if frame.f_code.co_name == "_wait" and frame.f_code.co_filename == proc.__file__:
            return True
        frame = frame.f_back
    return False


def _interrupt_then_release(workdir: Path) -> None:
    """Ctrl-C this process once the child has started, then let the child go on."""
    while not (workdir / "started").exists() or not _waiting_in_run():
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.3)  # a child killed at the interrupt never sees ``go``
    (workdir / "go").touch()


def test_a_child_may_finish_after_an_interrupt_before_it_is_killed(tmp_path: Path) -> None:
    """Git killed mid-write leaves ``index.lock``: the resumed run could commit nothing."""
    script = "touch started; while [ ! -e go ]; do sleep 0.01; done; touch done"
    threading.Thread(target=_interrupt_then_release, args=(tmp_path,), daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        proc.run(["sh", "-c", script], cwd=tmp_path, timeout=30, finish_on_interrupt=20)
    assert (tmp_path / "done").exists()


def test_without_a_grace_an_interrupted_child_is_killed_at_once(tmp_path: Path) -> None:
    script = "touch started; while [ ! -e go ]; do sleep 0.01; done; touch done"
    threading.Thread(target=_interrupt_then_release, args=(tmp_path,), daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        proc.run(["sh", "-c", script], cwd=tmp_path, timeout=30)
    assert not (tmp_path / "done").exists()  # killed before ``run`` raised
