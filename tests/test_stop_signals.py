"""``stops.stop_signals_interrupt``: SIGTERM and SIGHUP raise KeyboardInterrupt as Ctrl-C would,
and any of the three (Ctrl-C too) still does when it lands inside a callback Python cannot
raise out of (a weak reference's):
that interrupt would be printed as "Exception ignored" and lost, and a chat would sit at its
prompt after its terminal closed. A real process, since signals are the point."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

SCRIPT = """
import os, signal, sys, time, weakref
from tilth.stops import stop_signals_interrupt

class Thing:
    pass

heard = []
try:
    with stop_signals_interrupt(heard.append):
        thing = Thing()

        def gone(_ref):  # the signal lands here, where an exception cannot escape
            os.kill(os.getpid(), int(sys.argv[1]))
            for _ in range(100_000):
                pass

        ref = weakref.ref(thing, gone)
        del thing
        print("callback over", flush=True)
        time.sleep(10)
    print("never interrupted", flush=True)
    sys.exit(1)
except KeyboardInterrupt as exc:
    print(f"interrupted: {exc}; heard {len(heard)}", flush=True)
"""


@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["SIGTERM", "SIGHUP", "SIGINT"]
)
def test_an_interrupt_lost_in_a_callback_is_raised_again(sig: signal.Signals) -> None:
    # (SIGINT is Python's own Ctrl-C handler: one lost in a database library's
    # garbage-collection callback let a run of attempts go on.)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(int(sig))], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "callback over"
    heard = 0 if sig == signal.SIGINT else 2  # ``on_signal`` hears SIGTERM and SIGHUP
    assert lines[1].startswith("interrupted: ") and f"heard {heard}" in lines[1]
    assert "Exception ignored" not in done.stderr


DEFERRED = """
import os, signal, sys, time
from tilth.stops import stop_signals_interrupt, stops_deferred

try:
    with stop_signals_interrupt():
        with stops_deferred():
            os.kill(os.getpid(), int(sys.argv[1]))
            time.sleep(0.3)  # the signal has long landed: it waits
            print("block over", flush=True)
        time.sleep(10)
    print("never interrupted", flush=True)
    sys.exit(1)
except KeyboardInterrupt as exc:
    print(f"interrupted after the block: {exc!r}", flush=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_inside_a_deferred_block_comes_as_it_ends(sig: signal.Signals) -> None:
    # (The durable queue's database calls run so: a KeyboardInterrupt inside one of its
    # transactions left SQLite's write lock held, and the run's next write failed.)
    done = subprocess.run(
        [sys.executable, "-c", DEFERRED, str(int(sig))], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[:2] == [
        "block over",
        "interrupted after the block: "
        + (
            "KeyboardInterrupt()"
            if sig == signal.SIGINT
            else "KeyboardInterrupt('stopped by SIGTERM')"
        ),
    ], done.stdout + done.stderr
