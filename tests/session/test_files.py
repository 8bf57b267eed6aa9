"""Atomic state files: temp + fsync + rename; a crash leaves the old file whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tilth.errors import SessionCorrupt
from tilth.session.files import append_line, atomic_write_json, atomic_write_text, read_json

# The child writes a new version of the file but dies (SIGKILL) after the temp
# file is complete and before the rename: the moment a power cut would hurt most.
CRASH_BETWEEN_WRITE_AND_RENAME = """
import os, signal, sys
from pathlib import Path
from tilth.session import files

def die(src, dst):
    assert Path(src).read_text().startswith('{')
    os.kill(os.getpid(), signal.SIGKILL)

files.os.replace = die
files.atomic_write_json(Path(sys.argv[1]), {"version": "new", "blob": "x" * 200000})
"""

# The child rewrites the file in a loop until the parent kills it.
REWRITE_FOREVER = """
import sys
from pathlib import Path
from tilth.session.files import atomic_write_json
path = Path(sys.argv[1])
n = 0
print("ready", flush=True)
while True:
    n += 1
    atomic_write_json(path, {"n": n, "blob": "y" * 50000})
"""


def test_crash_between_temp_write_and_rename_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "checkpoint.json"
    atomic_write_json(target, {"version": "old"})
    child = subprocess.run(
        [sys.executable, "-c", CRASH_BETWEEN_WRITE_AND_RENAME, str(target)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert json.loads(target.read_text()) == {"version": "old"}
    # The orphaned temp file is hidden and never mistaken for the state file.
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "checkpoint.json"]
    assert len(leftovers) == 1 and leftovers[0].startswith(".checkpoint.json.")


def test_killed_writer_never_leaves_a_torn_file(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    atomic_write_json(target, {"n": 0})
    child = subprocess.Popen(
        [sys.executable, "-c", REWRITE_FOREVER, str(target)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        seen = 0
        while seen < 5:  # wait until the child has replaced the file a few times
            assert child.poll() is None, "writer died on its own"
            seen = json.loads(target.read_text())["n"]
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
    value = json.loads(target.read_text())
    assert value["n"] >= 5 and len(value["blob"]) == 50000


def test_successful_writes_leave_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "a.json"
    for n in range(10):
        atomic_write_json(target, {"n": n})
    atomic_write_text(tmp_path / "sub" / "b.txt", "hello")
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["a.json", "b.txt"]
    assert json.loads(target.read_text()) == {"n": 9}
    assert target.read_text().endswith("\n")


def test_failed_rename_removes_the_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "occupied"
    target.mkdir()
    (target / "keep").write_text("x")
    with pytest.raises(OSError):
        atomic_write_text(target, "data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["occupied"]


def test_read_json_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "missing.json", what="thing")
    bad = tmp_path / "bad.json"
    bad.write_text("{\n  oops")
    with pytest.raises(SessionCorrupt) as info:
        read_json(bad, what="thing.json")
    assert "thing.json" in str(info.value) and "line 2" in str(info.value)
    bad.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(SessionCorrupt, match="not UTF-8"):
        read_json(bad, what="thing.json")


def test_append_line_returns_size_and_is_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "log.jsonl"
    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    assert append_line(path, "é") == len("é\n".encode())
    assert append_line(path, "b") == path.stat().st_size
    assert synced.count(str(path)) == 2


def test_append_line_repair_cuts_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"a": 1}\n{"torn')
    append_line(path, '{"b": 2}', repair=True)
    assert path.read_bytes() == b'{"a": 1}\n{"b": 2}\n'
    path.write_bytes(b"only torn")
    append_line(path, "x", repair=True)
    assert path.read_bytes() == b"x\n"


def test_append_line_without_repair_keeps_bytes(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"hand edited")
    append_line(path, "next")
    assert path.read_bytes() == b"hand edited" + b"next\n"
