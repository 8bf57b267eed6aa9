"""The chat engines one ``tilth serve`` has open: one per chat session, closed at shutdown."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tilth.session.store import Session

if TYPE_CHECKING:
    from tilth.chat import ChatEngine
    from tilth.model.base import Model


class ChatEngines:
    """The chat engines this server opened, by session id (one per session)."""

    def __init__(self, settings: Any, model_factory: Callable[[], Model] | None) -> None:
        self.settings = settings
        self.model_factory = model_factory
        self._engines: dict[str, ChatEngine] = {}
        self._lock = threading.Lock()
        self._turns: dict[str, threading.Lock] = {}

    def get(self, session: Session) -> ChatEngine:
        """The open engine of ``session``, opening it on first use (blocking: call in a thread)."""
        with self._lock:
            engine = self._engines.get(session.id)
            if engine is None:
                from tilth.chat import ChatEngine

                model = self._model()
                engine = ChatEngine.resume(self.settings, session.id, model)
                self._engines[session.id] = engine
            return engine

    def turn_lock(self, session_id: str) -> threading.Lock:
        """Held by the request whose turn is running (it owns the engine's listener)."""
        with self._lock:
            return self._turns.setdefault(session_id, threading.Lock())

    def opened(self, session_id: str) -> ChatEngine | None:
        with self._lock:
            return self._engines.get(session_id)

    def _model(self) -> Model:
        if self.model_factory is not None:
            return self.model_factory()
        from tilth.model import model_for

        return model_for(self.settings, "worker")

    def close(self) -> None:
        with self._lock:
            engines, self._engines = list(self._engines.values()), {}
        for engine in engines:
            engine.close()
