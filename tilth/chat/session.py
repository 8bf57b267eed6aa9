"""Chat sessions on disk: a session directory like any other, working directly in a directory.

``checkpoint.json`` carries ``kind: "chat"``, ``source`` and ``workspace`` = the chat's
directory, no branch and no seed. Status: ``running`` while a chat has it open,
``all_done`` once the user left it normally, ``failed`` when the chat stopped on an
error. The conversation is the thread ``threads/chat.jsonl``; its checkpoints are file
snapshots (see ``tilth.timeline.record.dir_recorder``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from tilth.chat.toolview import describe_call
from tilth.config import Settings
from tilth.errors import SessionCorrupt, SessionLocked, UsageError
from tilth.session.lock import SessionLock
from tilth.session.store import Session
from tilth.session.threads import Thread

CHAT_KIND = "chat"
THREAD_KEY = "chat"


def chat_directory(
    raw: Path | str, *, keep_out: Sequence[Path] = (), own: Path | None = None
) -> Path:
    """``raw`` resolved, or a ``UsageError`` saying why a chat cannot work there.

    ``keep_out``: Tilth's own places (``$TILTH_HOME``, the sessions directory). The model
    writes anywhere in a chat's directory, so a directory holding one of them (its ``.env``
    steers the settings; other sessions' records) or inside one (a run's worktree) is
    refused — but for ``own``, the session's own directory, where a fork of a chat works.
    """
    path = Path(raw).expanduser()
    if not path.exists():
        raise UsageError(
            f"{path} does not exist", hint="give an existing directory: tilth chat [DIR]"
        )
    if not path.is_dir():
        raise UsageError(f"{path} is not a directory", hint="give a directory: tilth chat [DIR]")
    resolved = path.resolve()
    if resolved == Path("/") or resolved == Path.home().resolve():
        # Every file under it would be indexed and snapshotted: never what was meant.
        raise UsageError(
            f"{resolved} is too broad a place for a chat: every file in it is captured",
            hint="run tilth chat in a project directory: tilth chat ~/src/project",
        )
    for place in (p.resolve() for p in keep_out):
        if place.is_relative_to(resolved):
            raise UsageError(
                f"{resolved} holds Tilth's own files ({place}): the model could rewrite "
                "your settings and other sessions there",
                hint="run tilth chat in a project directory, or move TILTH_HOME out of it",
            )
        if resolved.is_relative_to(place) and not (own and resolved.is_relative_to(own.resolve())):
            raise UsageError(
                f"{resolved} is inside Tilth's own files ({place})",
                hint="a run's worktree is changed through tilth resume, rewind and restart; "
                "run tilth chat in a project directory",
            )
    if not os.access(resolved, os.W_OK | os.X_OK):
        raise UsageError(
            f"{resolved} is not writable, so the chat could not change files there",
            hint="choose a directory you can write to, or fix its permissions",
        )
    return resolved


def tilth_places(settings: Settings) -> tuple[Path, ...]:
    """Where Tilth keeps its own files: no chat may work in, around or under them."""
    return (settings.home, settings.sessions_dir)


def is_chat(session: Session) -> bool:
    """True when ``session`` is a chat session (``kind: "chat"`` in checkpoint.json)."""
    try:
        return session.record().kind == CHAT_KIND
    except (SessionCorrupt, OSError):
        return False


def create_chat_session(settings: Settings, directory: Path) -> Session:
    """A new chat session working in ``directory`` (already checked)."""
    session = Session.create(
        settings.sessions_dir,
        directory,
        kind=CHAT_KIND,
        workspace=str(directory),
        branch=None,
        status="running",
    )
    session.log("session_start", kind=CHAT_KIND, workspace=str(directory))
    return session


def open_chat_session(settings: Settings, session_id: str) -> Session:
    """The existing chat session ``session_id``; refuses other kinds of session."""
    session = Session.open(settings.sessions_dir, session_id)
    if not is_chat(session):
        raise UsageError(
            f"session {session_id} is not a chat session",
            hint="`tilth sessions` shows each session's kind; continue a run with `tilth resume`",
        )
    return session


def hold_open(session: Session) -> SessionLock:
    """The chat's open-lock, taken: one front end (a terminal's ``tilth chat`` or the
    ``tilth serve`` that opened it) has a chat open at a time, from start to close.

    Two engines on one chat would each watch the directory and take the other's edits
    and restores for changes of their own. Raises ``SessionLocked`` naming the holder.
    """
    lock = SessionLock(session.dir, session.id, name=".chat-open")
    try:
        return lock.acquire()
    except SessionLocked:
        pid = lock.holder_pid()
        raise SessionLocked(
            f"chat session {session.id} is open in another front end "
            f"({f'pid {pid}' if pid else 'another process'}: a tilth chat, or a tilth serve "
            "that opened it)",
            hint="leave it there first (Ctrl-D in the chat, Ctrl-C to the server), then try again",
        ) from None


def chat_workspace(session: Session, keep_out: Sequence[Path] = ()) -> Path:
    """The directory the chat works in, checked again (it may have moved since)."""
    raw = session.record().workspace
    if not raw:
        raise SessionCorrupt(f"chat session {session.id} names no directory")
    try:
        return chat_directory(Path(str(raw)), keep_out=keep_out, own=session.dir)
    except UsageError as exc:
        # The hint of a new chat (give a DIR) does not fit: a chat resumes where it started.
        raise UsageError(
            f"chat session {session.id} works in {raw}, but {exc.message}",
            hint=f"move the directory back to {raw}, or start a new chat: tilth chat DIR",
        ) from None


def first_prompt(session: Session, limit: int = 120) -> str | None:
    """What the chat is about: the first line of its first prompt still in the conversation.

    A summary that replaced the first turns still holds them, so the chat keeps its first
    prompt as its label after "summarize up to here". Read from the thread's first lines
    only, so a listing of many chats stays quick.
    """
    path = session.threads.get(THREAD_KEY).path
    try:
        with open(path, encoding="utf-8", errors="replace") as lines:
            for line in islice(lines, 20):
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                text = _prompt_in(record)
                if text:
                    first = text.splitlines()[0]
                    return first if len(first) <= limit else first[: limit - 1] + "…"
    except OSError:
        return None
    return None


def _prompt_in(record: Any) -> str | None:
    """The person's prompt in one stored message, or the first one a summary replaced."""
    if not isinstance(record, dict):
        return None
    message, meta = record.get("message"), record.get("meta")
    if not isinstance(message, dict) or message.get("role") != "user":
        return None
    kind = meta.get("kind") if isinstance(meta, dict) else None
    if kind == "summary" and isinstance(meta, dict) and isinstance(meta.get("replaced"), list):
        for inner in meta["replaced"]:
            found = _prompt_in(inner)
            if found:
                return found
        return None
    if kind:
        return None  # a note of tilth's, not the person's words
    return str(message.get("content") or "").strip() or None


def _call_line(call: dict[str, Any]) -> str:
    """A stored tool call as its one line (``write_file hello.py (3 lines)``)."""
    function = call.get("function") or {}
    try:
        args = json.loads(function.get("arguments") or "{}")
    except (TypeError, ValueError, RecursionError):
        args = {}
    return describe_call(str(function.get("name")), args if isinstance(args, dict) else {})


def transcript(thread: Thread) -> list[dict[str, Any]]:
    """A chat thread as front ends show it: ``{id, role, text, turn?, tools?, calls?, kind?}``
    items (the system prompt left out; ``calls``: each tool call as its one line). A pure
    read, so a web page can show a chat it has not opened."""
    shown: list[dict[str, Any]] = []
    for stored in thread.read():
        message = stored.message
        role = str(message.get("role"))
        if role == "system":
            continue
        item: dict[str, Any] = {"id": stored.id, "role": role}
        item["text"] = str(message.get("content") or "")
        if "turn" in stored.meta:
            item["turn"] = stored.meta["turn"]
        calls = message.get("tool_calls") or []
        if calls:
            item["tools"] = [c.get("function", {}).get("name") for c in calls]
            item["calls"] = [_call_line(c) for c in calls]
        if stored.meta.get("kind"):
            item["kind"] = stored.meta["kind"]
        shown.append(item)
    return shown
