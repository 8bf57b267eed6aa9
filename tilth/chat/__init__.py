"""The interactive conversation: one engine shared by the terminal and the web UI.

``ChatEngine.start(settings, directory, model, listener=..., confirm=...)`` opens a new chat
session working directly in ``directory``; ``ChatEngine.resume(settings, id, model)``
continues one. ``send(prompt)`` runs a user turn and reports through ``ChatEvent`` s; the
go-back methods (``rewind``, ``undo``, ``fork``, ``summarize``) plan and execute through the
timeline controller. See docs/chat.md.
"""

from tilth.chat.engine import MAX_PROMPT_CHARS, ChatEngine
from tilth.chat.events import EVENT_TYPES, CancelToken, ChatEvent, Confirm, Listener
from tilth.chat.session import CHAT_KIND, THREAD_KEY, is_chat

__all__ = [
    "CHAT_KIND",
    "EVENT_TYPES",
    "MAX_PROMPT_CHARS",
    "THREAD_KEY",
    "CancelToken",
    "ChatEngine",
    "ChatEvent",
    "Confirm",
    "Listener",
    "is_chat",
]
