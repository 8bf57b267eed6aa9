"""A chat never works where the model could rewrite Tilth's own files: in a directory that
holds ``$TILTH_HOME`` (its ``.env`` steers the settings, keys included) or the sessions, nor
inside them (a run's worktree); a fork of a chat still works in its own session directory."""

from __future__ import annotations

from pathlib import Path

from tests.chat.test_chat_wild import chat
from tilth.model import FakeServer, Script, reply


def test_a_directory_holding_tilth_home_is_refused(tmp_path: Path) -> None:
    with FakeServer(Script({"worker": [reply("never asked")]})) as server:
        result = chat(tmp_path, ["write home/.env"], server, ".")
        assert server.requests == []
    assert result.returncode == 2, result.stdout + result.stderr
    assert "holds Tilth's own files" in result.stderr
    assert "TILTH_HOME" in result.stderr
    assert not (tmp_path / "home" / "sessions").exists() or not any(
        (tmp_path / "home" / "sessions").iterdir()
    ), "no session was made"


def test_a_directory_inside_tilth_home_is_refused(tmp_path: Path) -> None:
    inside = tmp_path / "home" / "sessions" / "20260101-000000-abcdef" / "workspace"
    inside.mkdir(parents=True)
    with FakeServer(Script({"worker": [reply("never asked")]})) as server:
        result = chat(tmp_path, ["hi"], server, str(inside))
        also = chat(tmp_path, ["hi"], server, str(tmp_path / "home"))
    assert result.returncode == 2 and "is inside Tilth's own files" in result.stderr
    assert also.returncode == 2 and "holds Tilth's own files" in also.stderr
