"""Shared pieces of the chat tests: settings in a temp home, directory hashes, a recorder."""

from __future__ import annotations

import hashlib
import os
from functools import cache
from pathlib import Path
from typing import Any

from tilth.chat import ChatEngine, ChatEvent
from tilth.config import Settings, load_settings
from tilth.model import Script, ScriptedModel


@cache
def top_level_sandbox() -> dict[str, str]:
    """The sandbox for a chat whose bash creates or removes entries at the top of a git
    repository (these tests are about the capture and the timeline, not the sandbox):
    ``auto`` where bubblewrap works (CI installs it), else ``off``. Landlock, the fallback,
    cannot let bash do that beside a read-only ``.git`` (docs/security.md; its refusal is
    tested in tests/tools/test_sandbox.py)."""
    from tilth.tools.sandbox import probe

    usable, _ = probe()
    return {} if usable else {"TILTH_SANDBOX": "off"}


def chat_settings(root: Path) -> Settings:
    """Settings whose home and sessions live under ``root``."""
    return load_settings({"TILTH_HOME": str(root / "home"), **top_level_sandbox()})


def tree_hash(directory: Path) -> dict[str, str]:
    """``relative path → sha256`` of every file under ``directory`` (links by target)."""
    out: dict[str, str] = {}
    for current, _dirs, names in os.walk(directory):
        for name in names:
            path = Path(current) / name
            rel = path.relative_to(directory).as_posix()
            if path.is_symlink():
                out[rel] = "link:" + os.readlink(path)
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


class Recorder:
    """A listener that keeps every event."""

    def __init__(self) -> None:
        self.events: list[ChatEvent] = []

    def __call__(self, event: ChatEvent) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def of(self, type_: str) -> list[dict[str, Any]]:
        return [e.data for e in self.events if e.type == type_]

    def text(self) -> str:
        return "".join(e.data["text"] for e in self.events if e.type == "text")


def start(
    root: Path, directory: Path, replies: list[Any], **options: Any
) -> tuple[ChatEngine, Recorder]:
    """A chat engine on a scripted model in ``directory``, recording its events."""
    events = Recorder()
    model = ScriptedModel(Script({"*": replies}), name="chat")
    engine = ChatEngine.start(
        chat_settings(root), directory, model, listener=events, index_in_background=False, **options
    )
    return engine, events


def chat_with_turns(root: Path, directory: Path, count: int) -> str:
    """A closed chat session of ``count`` turns; returns its id.

    One turn runs for real; the others are copies of its checkpoint under their own
    numbers, labels and times (a long chat's timeline, built in a moment).
    """
    import json

    from tilth.model import reply
    from tilth.timeline.record.checkpoints import checkpoint_path

    engine, _ = start(root, directory, [reply("Done.")])
    try:
        engine.send("prompt 1")
        first = engine.turns()[0]
        data = first.to_dict()
        for number in range(2, count + 1):
            minute, second = divmod(number, 60)
            data.update(
                id=f"cp-{number:04d}",
                seq=number,
                turn=number,
                label=f"prompt {number}",
                ts=f"2026-01-01T{10 + minute // 60:02d}:{minute % 60:02d}:{second:02d}.000Z",
                files_changed=[f"f{number}.txt"] if number % 3 == 0 else [],
            )
            checkpoint_path(engine.session, number).write_text(json.dumps(data))
    finally:
        engine.close()
    return engine.id
