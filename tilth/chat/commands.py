"""Slash commands of a chat: parsing only (the front ends carry them out).

``/rewind [N [code|conversation|both]]``, ``/fork [N]``, ``/summarize N from|up-to``,
``/undo``, ``/checkpoints``, ``/help``, ``/exit``. ``N`` is the turn number
``/checkpoints`` shows. A missing argument is reported by the front end when it cannot
ask (stdin not a terminal); a malformed one is a ``UsageError`` here.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilth.errors import UsageError

SCOPE_WORDS = {
    "both": "both",
    "code+conversation": "both",
    "code": "code",
    "conversation": "conversation",
    "conv": "conversation",
}
HELP = (
    ("/rewind [N [code|conversation|both]]", "go back to just before turn N (Esc Esc: picker)"),
    ("/fork [N]", "start a new chat from just before turn N, in its own directory"),
    ("/summarize N from|up-to", "replace the conversation from / up to turn N with a summary"),
    ("/undo", "undo the last rewind (or undo)"),
    ("/checkpoints", "list the turns you can go back to"),
    ("/help", "this list"),
    ("/exit", "leave the chat (Ctrl-D does too)"),
)
NAMES = ("rewind", "fork", "summarize", "undo", "checkpoints", "help", "exit")
ALIASES = {"quit": "exit", "q": "exit", "turns": "checkpoints", "?": "help"}


@dataclass(frozen=True)
class Command:
    """A parsed slash command: its name and checked arguments (None where left out)."""

    name: str
    turn: int | None = None
    scope: str | None = None
    direction: str | None = None


class UnknownCommand(UsageError):
    """A ``/word`` that is not a chat command."""


def help_text() -> str:
    width = max(len(usage) for usage, _ in HELP)
    return "\n".join(f"  {usage:{width}}  {what}" for usage, what in HELP)


def is_command(line: str) -> bool:
    """True for ``/word ...`` (a path like ``/etc/hosts is odd`` is a prompt, not a command)."""
    text = line.strip()
    if not text.startswith("/") or text.startswith("//"):
        return False
    word = text[1:].split(None, 1)[0] if len(text) > 1 else ""
    return "/" not in word


def _turn(raw: str, usage: str) -> int:
    if not raw.isdigit() or int(raw) < 1:
        raise UsageError(f"{raw!r} is not a turn number", hint=f"usage: {usage}")
    return int(raw)


def parse(line: str) -> Command:
    """The command on ``line`` (which starts with ``/``); raises ``UsageError``."""
    words = line.strip()[1:].split()
    if not words:
        raise UnknownCommand("an empty command", hint="commands:\n" + help_text())
    name = ALIASES.get(words[0].lower(), words[0].lower())
    args = words[1:]
    if name not in NAMES:
        raise UnknownCommand(f"unknown command /{words[0]}", hint="commands:\n" + help_text())
    usage = next(u for u, _ in HELP if u.split()[0] == f"/{name}")
    if name == "rewind":
        if len(args) > 2:
            raise UsageError("too many arguments", hint=f"usage: {usage}")
        turn = _turn(args[0], usage) if args else None
        scope = None
        if len(args) == 2:
            scope = SCOPE_WORDS.get(args[1].lower())
            if scope is None:
                raise UsageError(
                    f"{args[1]!r} is not a scope; say code, conversation or both",
                    hint=f"usage: {usage}",
                )
        return Command(name, turn=turn, scope=scope)
    if name == "fork":
        if len(args) > 1:
            raise UsageError("too many arguments", hint=f"usage: {usage}")
        return Command(name, turn=_turn(args[0], usage) if args else None)
    if name == "summarize":
        if len(args) > 2:
            raise UsageError("too many arguments", hint=f"usage: {usage}")
        turn = _turn(args[0], usage) if args else None
        direction = None
        if len(args) == 2:
            direction = {"from": "from", "up-to": "up-to", "upto": "up-to"}.get(args[1].lower())
            if direction is None:
                raise UsageError(f"{args[1]!r} is not from or up-to", hint=f"usage: {usage}")
        return Command(name, turn=turn, direction=direction)
    if args:
        raise UsageError(f"/{name} takes no arguments", hint=f"usage: {usage}")
    return Command(name)
