"""Stop signals: Ctrl-C, SIGTERM and SIGHUP, each a stop of Tilth's work.

A run, a chat or a fork's exit wait takes SIGTERM and SIGHUP as it takes Ctrl-C
(``stop_signals_interrupt``); a short call into a library that must not be cut half-way
holds all three until it ends (``stops_deferred``).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

STOP_SIGNALS: dict[int, str] = {
    signal.SIGTERM: "stopped by SIGTERM",
    signal.SIGHUP: "the terminal was closed (SIGHUP)",
}
"""The signals that stop a run or a chat as Ctrl-C does, with the words a ``stop`` records."""
ALL_STOPS: tuple[int, ...] = (signal.SIGINT, *STOP_SIGNALS)
"""Ctrl-C and the signals taken as it: every signal that stops Tilth's work."""


@contextmanager
def stop_signals_interrupt(on_signal: Callable[[str], None] | None = None) -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise ``KeyboardInterrupt(<their words>)`` in the
    main thread, as Ctrl-C would (``on_signal`` hears the words first); elsewhere than in
    the main thread, signals are left alone.

    A signal that lands while Python runs a callback it cannot raise out of (a weak
    reference's, a finalizer's) would be printed as "Exception ignored" and lost, and a chat
    would go on waiting at its prompt: such a lost interrupt is sent again, a moment later,
    from another thread, so it is raised where the program can act on it. So is a lost
    Ctrl-C (Python's own SIGINT handler raises a ``KeyboardInterrupt`` without words: one
    that landed in a database library's garbage-collection callback let a run go on).
    """
    raised: dict[str, int] = {}

    def interrupt(signum: int, frame: object) -> None:
        words = STOP_SIGNALS.get(signum, f"signal {signum}")
        if on_signal is not None:
            on_signal(words)
        raised[words] = signum
        raise KeyboardInterrupt(words)

    try:
        previous = {sig: signal.signal(sig, interrupt) for sig in STOP_SIGNALS}
    except ValueError:  # not the main thread
        yield
        return
    hook = sys.unraisablehook

    def rescue(unraisable: Any) -> None:
        lost = unraisable.exc_value
        if isinstance(lost, KeyboardInterrupt):
            words = lost.args[0] if lost.args else None
            again = raised.get(words) if words is not None else signal.SIGINT
            if again is not None:
                timer = threading.Timer(RESEND_SECONDS, os.kill, (os.getpid(), again))
                timer.daemon = True
                timer.start()
                return
        hook(unraisable)

    sys.unraisablehook = rescue
    try:
        yield
    finally:
        sys.unraisablehook = hook
        for sig, handler in previous.items():
            signal.signal(sig, handler)


RESEND_SECONDS = 0.05
"""How long after a lost interrupt it is sent again (out of the callback that lost it)."""


@contextmanager
def stops_deferred() -> Iterator[None]:
    """While inside, Ctrl-C, SIGTERM and SIGHUP wait: each one that comes is sent again as
    the block ends, to whatever handles it then (in the main thread; elsewhere signals are
    left alone, as Python handles them only there).

    For short calls into a library that must not be cut half-way: a ``KeyboardInterrupt``
    raised inside a database transaction of the durable queue's left the connection holding
    SQLite's write lock, and every later write of that process failed "database is locked".
    """
    waiting: list[int] = []

    def wait(signum: int, frame: object) -> None:
        waiting.append(signum)

    try:
        previous = {sig: signal.signal(sig, wait) for sig in ALL_STOPS}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(waiting):
            os.kill(os.getpid(), signum)
