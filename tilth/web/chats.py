"""The chat engines one ``tilth serve`` has open: one per chat session, only while in use.

The page holds a chat only while one of its turns (or go-backs) runs: the engine is
opened for it and closed after, so ``tilth chat --resume`` can take the chat back between
turns (and is told plainly while a turn runs). A chat the server closes ends as ``tilth
chat`` ends when the person leaves it: status ``all_done`` and a ``stop`` event. At
shutdown (Ctrl-C, SIGTERM) a turn still running is cancelled first, as Ctrl-C cancels it
in a terminal, so the chat can be closed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tilth import Session
from tilth.chat import CancelToken
from tilth.errors import UsageError

if TYPE_CHECKING:
    from tilth import Model
    from tilth.chat import ChatEngine

CLOSE_WAIT_SECONDS = 10.0
"""At shutdown, how long a cancelled turn may take to end (a tool it runs finishes first)."""


class ChatEngines:
    """The chat engines this server opened, by session id (one per session)."""

    def __init__(self, settings: Any, model_factory: Callable[[], Model] | None) -> None:
        self.settings = settings
        self.model_factory = model_factory
        self._engines: dict[str, ChatEngine] = {}
        self._lock = threading.Lock()
        self._turns: dict[str, threading.Lock] = {}
        self._turn_users: dict[str, int] = {}
        """Requests holding each ``_turns`` lock: an entry goes when the last one ends."""
        self._cancels: dict[str, CancelToken] = {}
        self._users: dict[str, int] = {}
        self._closing = False

    @contextmanager
    def borrowed(self, session: Session) -> Iterator[ChatEngine]:
        """The engine of ``session``, open while the block runs (blocking: call in a thread).

        Opened on entry (refused while a terminal holds the chat), closed when the last
        block using it ends, so the chat is free again between turns.
        """
        with self._lock:
            if self._closing:
                raise UsageError("the server is stopping; nothing was done")
            engine = self._engines.get(session.id)
            if engine is None:
                from tilth.chat import ChatEngine

                engine = ChatEngine.resume(self.settings, session.id, self._model())
                self._engines[session.id] = engine
            self._users[session.id] = self._users.get(session.id, 0) + 1
        try:
            yield engine
        finally:
            with self._lock:
                left = self._users.get(session.id, 1) - 1
                self._users[session.id] = left
                last = left == 0 and self._engines.get(session.id) is engine
                if last:
                    del self._engines[session.id]
                    del self._users[session.id]
            if last:
                engine.close(status="all_done")

    @contextmanager
    def turn_held(self, session_id: str) -> Iterator[bool]:
        """Try to hold the turn of ``session_id`` for this request (it then owns the engine's
        listener): True when held, False while another request's turn runs. Kept only while
        some request asks, so a server keeps nothing per chat between turns."""
        with self._lock:
            lock = self._turns.setdefault(session_id, threading.Lock())
            self._turn_users[session_id] = self._turn_users.get(session_id, 0) + 1
        held = lock.acquire(blocking=False)
        try:
            yield held
        finally:
            if held:
                lock.release()
            with self._lock:
                left = self._turn_users[session_id] - 1
                if left:
                    self._turn_users[session_id] = left
                else:
                    del self._turn_users[session_id], self._turns[session_id]

    def tracked(self) -> set[str]:
        """The sessions this server keeps anything for now (an open engine, a turn)."""
        with self._lock:
            return set(self._engines) | set(self._turns) | set(self._cancels) | set(self._users)

    def turn_started(self, session_id: str) -> CancelToken:
        """The token that cancels the turn starting now (refused once the server stops)."""
        token = CancelToken()
        with self._lock:
            if self._closing:
                raise UsageError("the server is stopping; nothing was sent")
            self._cancels[session_id] = token
        return token

    def turn_ended(self, session_id: str, token: CancelToken) -> None:
        with self._lock:
            if self._cancels.get(session_id) is token:
                del self._cancels[session_id]

    def turn_running(self, session_id: str) -> bool:
        """True while this server runs a turn of ``session_id`` (whichever page sent it)."""
        with self._lock:
            return session_id in self._cancels

    def cancel_turn(self, session_id: str, wait: float = CLOSE_WAIT_SECONDS) -> bool:
        """Cancel the turn of ``session_id`` this server is running, as Ctrl-C does, and
        wait up to ``wait`` seconds for it to end; False when none is running."""
        with self._lock:
            token = self._cancels.get(session_id)
            running = self._turns.get(session_id)
        if token is None or running is None:
            return False
        token.cancel()
        if running.acquire(timeout=wait):
            running.release()
        return True

    def cancel_turns(self) -> None:
        """Cancel every running turn and refuse new ones (the server is stopping).

        Called from the signal handler too: it takes no lock, it only sets flags.
        """
        self._closing = True
        for token in list(self._cancels.values()):
            token.cancel()

    def opened(self, session_id: str) -> ChatEngine | None:
        with self._lock:
            return self._engines.get(session_id)

    def _model(self) -> Model:
        if self.model_factory is not None:
            return self.model_factory()
        from tilth.model import model_for

        return model_for(self.settings, "worker")

    def close(self, wait: float = CLOSE_WAIT_SECONDS) -> None:
        """End every open chat as a terminal's chat ends when left (status ``all_done``),
        cancelling a running turn first and giving it ``wait`` seconds to end."""
        self.cancel_turns()
        with self._lock:
            engines, self._engines = dict(self._engines), {}
            turns = dict(self._turns)
        deadline = time.monotonic() + wait
        for session_id, engine in engines.items():
            running = turns.get(session_id)
            if running is not None and running.acquire(
                timeout=max(0.0, deadline - time.monotonic())
            ):
                running.release()
            engine.close(status="all_done")
