"""The interactive conversation: one engine shared by the terminal and the web UI.

``ChatEngine.start(settings, directory, model, listener=..., confirm=...)`` opens a new chat
session working directly in ``directory``; ``ChatEngine.resume(settings, id, model)``
continues one. ``send(prompt)`` runs a user turn and reports through ``ChatEvent`` s; the
go-back methods (``rewind``, ``undo``, ``fork``, ``summarize``) plan and execute through the
timeline controller. See docs/chat.md. The names below load on first use (``tilth.faces``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tilth.faces import lazy_face

if TYPE_CHECKING:
    from tilth.chat.commands import Command as Command
    from tilth.chat.commands import help_text as help_text
    from tilth.chat.commands import is_command as is_command
    from tilth.chat.commands import parse as parse
    from tilth.chat.engine import MAX_PROMPT_CHARS as MAX_PROMPT_CHARS
    from tilth.chat.engine import ChatEngine as ChatEngine
    from tilth.chat.events import EVENT_TYPES as EVENT_TYPES
    from tilth.chat.events import CancelToken as CancelToken
    from tilth.chat.events import ChatEvent as ChatEvent
    from tilth.chat.events import Confirm as Confirm
    from tilth.chat.events import Listener as Listener
    from tilth.chat.session import CHAT_KIND as CHAT_KIND
    from tilth.chat.session import THREAD_KEY as THREAD_KEY
    from tilth.chat.session import chat_directory as chat_directory
    from tilth.chat.session import first_prompt as first_prompt
    from tilth.chat.session import is_chat as is_chat
    from tilth.chat.session import transcript as transcript

__getattr__, __dir__ = lazy_face(__name__, __file__)
