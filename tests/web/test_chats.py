"""What ``tilth serve`` keeps per chat: nothing once a turn is over — the engine closed
with its model's connections, no lock or count left behind for the session."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tests.chat.support import chat_settings
from tilth import chat
from tilth.config import Settings
from tilth.model import Script, ScriptedModel, reply
from tilth.session.store import Session
from tilth.web.chats import ChatEngines


class Closable(ScriptedModel):
    """A scripted model that counts ``close`` calls, as an ``OpenAIModel`` closes its pool."""

    closed = 0

    def close(self) -> None:
        type(self).closed += 1


def made_chat(settings: Settings, directory: Path) -> str:
    directory.mkdir()
    engine = chat.ChatEngine.start(
        settings, directory, ScriptedModel(Script([])), index_in_background=False
    )
    engine.close()
    return engine.id


def test_a_served_turn_leaves_nothing_open_behind(tmp_path: Path) -> None:
    settings = chat_settings(tmp_path)
    session_id = made_chat(settings, tmp_path / "work")
    models: list[Closable] = []

    def model() -> Closable:
        models.append(Closable(Script({"*": [reply("Hello."), reply("Again.")]}), "chat"))
        return models[-1]

    chats = ChatEngines(settings, model)
    session = Session.open(settings.sessions_dir, session_id)
    results: list[dict[str, Any]] = []
    for text in ("hi", "more"):
        with chats.turn_held(session_id) as mine:
            assert mine
            with chats.turn_held(session_id) as other:
                assert not other, "a second request waits for the turn"
            with chats.borrowed(session) as engine:
                assert chats.tracked() == {session_id}
                results.append(engine.send(text))
    assert [r["outcome"] for r in results] == ["done", "done"]
    assert len(models) == 2 and Closable.closed == 2, "each engine closed its model"
    assert chats.tracked() == set()


def test_requests_racing_for_a_turn_share_one_lock(tmp_path: Path) -> None:
    chats = ChatEngines(chat_settings(tmp_path), None)
    held, release, won = threading.Event(), threading.Event(), []

    def first() -> None:
        with chats.turn_held("s") as mine:
            won.append(mine)
            held.set()
            release.wait(30)

    runner = threading.Thread(target=first)
    runner.start()
    held.wait(30)
    for _ in range(3):  # each refused request leaves the entry to the one still holding it
        with chats.turn_held("s") as mine:
            won.append(mine)
    release.set()
    runner.join(30)
    with chats.turn_held("s") as mine:
        won.append(mine)
    assert won == [True, False, False, False, True]
    assert chats.tracked() == set()
