"""Turn capture, with git and without, and the chat's restore treat a link to a directory as
a link: recorded as its target text, never followed."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.chat.support import start
from tests.conftest import make_repo
from tilth.chat import ChatEngine
from tilth.model import reply, tool_call
from tilth.timeline.record.blob_store import BlobStore, split_entry
from tilth.timeline.record.checkpoints import checkpoint_path
from tilth.timeline.record.dir_capture import DirCapture
from tilth.timeline.record.turn_capture import TurnCapture


@pytest.fixture(params=["inotify", "scan"])
def watch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TILTH_CAPTURE_WATCH", request.param)
    return str(request.param)


def listing(directory: Path) -> dict[str, str]:
    """Every entry under ``directory`` without following links: ``path → content or link``."""
    out: dict[str, str] = {}
    for current, dirs, names in os.walk(directory):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in names + dirs:
            path = Path(current) / name
            rel = path.relative_to(directory).as_posix()
            if path.is_symlink():
                out[rel] = "link:" + os.readlink(path)
            elif path.is_file():
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    return out


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


ORIGINAL = {
    "README.md": digest("# sample\n"),
    "data/app.py": digest("old = 1\n"),
    "data/notes.txt": digest("mine\n"),
    "src/app.py": digest("x = 1\n"),
}

KEPT = {"README.md": "# sample\n", "src/app.py": "x = 1\n"}
"""What the capture holds besides ``data`` once the turn replaced it."""


def chat_in_repo(tmp_path: Path, *commands: str) -> tuple[ChatEngine, Path]:
    """A chat in a git repository whose turns each run one of ``commands`` with bash."""
    work = make_repo(
        tmp_path / "work",
        {
            "README.md": "# sample\n",
            "data/notes.txt": "mine\n",
            "data/app.py": "old = 1\n",
            "src/app.py": "x = 1\n",
        },
    )
    replies = []
    for command in commands:
        replies += [reply(None, tool_call("bash", command=command)), reply("done")]
    engine, _ = start(tmp_path, work, replies)
    return engine, work


def captured(engine: ChatEngine) -> dict[str, str]:
    """The directory as the capture recorded it: ``path → text`` (``link:`` + target)."""
    out = {}
    for rel, entry in engine.capture.full_state().items():
        blob, kind = split_entry(entry)
        text = engine.store.get(blob).decode()
        out[rel] = f"link:{text}" if kind == "l" else text
    return out


def test_a_link_to_a_directory_outside_is_recorded_as_a_link_and_a_rewind_leaves_it_alone(
    tmp_path: Path, watch: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("secret\n")
    (outside / "other.txt").write_text("not the chat's\n")
    before = listing(outside)
    engine, work = chat_in_repo(tmp_path, f"rm -rf data && ln -s {outside} data")
    turn = engine.send("swap the data directory for a link")
    assert turn["files_changed"] == ["data", "data/app.py", "data/notes.txt"]
    assert captured(engine) == {**KEPT, "data": f"link:{outside}"}
    engine.rewind(1, "code")
    assert listing(work) == ORIGINAL
    assert listing(outside) == before


def test_a_link_to_a_directory_inside_is_recorded_as_a_link_not_as_copies(
    tmp_path: Path, watch: str
) -> None:
    engine, work = chat_in_repo(tmp_path, "rm -rf data && ln -s src data")
    engine.send("make data an alias of src")
    assert captured(engine) == {**KEPT, "data": "link:src"}
    engine.rewind(1, "code")
    assert listing(work) == ORIGINAL


def test_a_rewind_never_writes_through_a_link_put_where_a_directory_was(
    tmp_path: Path, watch: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("secret\n")
    before = listing(outside)
    engine, work = chat_in_repo(tmp_path, "echo v2 > data/notes.txt")
    engine.send("edit the notes")
    subprocess.run(["rm", "-rf", str(work / "data")], check=True)
    (work / "data").symlink_to(outside)  # the user's own change, after the turn
    plan = engine.plan_rewind(1, "code")
    assert plan.conflicts == ["data/notes.txt"] and plan.files == []
    engine.rewind(1, "code")
    assert os.readlink(work / "data") == str(outside)
    forced = engine.rewind(1, "code", force=True)
    assert forced["files"] == [["restore", "data/notes.txt"]]
    assert (work / "data").is_dir() and not (work / "data").is_symlink()
    assert (work / "data" / "notes.txt").read_text() == "mine\n"
    assert listing(outside) == before


@pytest.mark.parametrize("kind", ["chat", "git"])
def test_a_write_announced_through_an_inside_link_is_recorded_at_the_real_path(
    tmp_path: Path, kind: str
) -> None:
    work = make_repo(tmp_path / "work", {"src/app.py": "x = 1\n"})
    (work / "alias").symlink_to("src")
    store = BlobStore(tmp_path / "store")
    capture: DirCapture | TurnCapture
    if kind == "chat":
        capture = DirCapture(work, store, watch=False).start()
    else:
        capture = TurnCapture(None, work, store, watch=False)
        capture.resync()
    capture.before_write(work / "alias" / "app.py")
    (work / "src" / "app.py").write_text("x = 2\n")
    turn = capture.finish_turn()
    capture.close()
    assert turn.files_changed == ["src/app.py"]
    assert sorted(turn.overlay) == (["alias", "src/app.py"] if kind == "git" else ["src/app.py"])


def test_a_checkpoint_that_followed_a_link_restores_the_link_not_a_copy(tmp_path: Path) -> None:
    engine, work = chat_in_repo(
        tmp_path, "rm -rf data && ln -s src data", "rm data && mkdir data && echo new > data/app.py"
    )
    engine.send("make data an alias of src")
    engine.send("make it a directory again")
    assert captured(engine) == {**KEPT, "data/app.py": "new\n"}
    # Turn 2 starts where turn 1 left: as capture recorded it while it still followed
    # links, the link and a copy of what was behind it.
    path = checkpoint_path(engine.session, engine.turn(2).seq)
    record = json.loads(path.read_text())
    record["overlay"]["data/app.py"] = engine.capture.full_state()["src/app.py"]
    path.write_text(json.dumps(record))
    engine.rewind(2, "code")
    assert listing(work) == {
        "README.md": digest("# sample\n"),
        "data": "link:src",
        "src/app.py": digest("x = 1\n"),
    }
