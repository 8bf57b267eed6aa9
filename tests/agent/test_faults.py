"""Faults end cleanly: a closed terminal or pipe stops a run like Ctrl-C; a full disk and a
missing permission are one-line errors naming the path; a read-only session stays readable."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.support import TASKS, model_env, recipes, seed_session, team_server, tilth
from tests.warm_cli import PIPE, WarmProcess, shared
from tilth.demo.script import Team
from tilth.errors import StorageError
from tilth.model.script import Reply, delay
from tilth.session.events import EventLog
from tilth.session.files import append_line, atomic_write_json

ONE_TASK = TASKS[:1]


def _slow_implementing(team: Team) -> Any:
    def script(model: str, request: dict[str, Any]) -> Reply:
        answer = team(model, request)
        names = {t["function"]["name"] for t in request.get("tools") or []}
        return delay(60, answer) if "submit_case" in names else answer

    return script


def _popen(repo: Path, env: dict[str, str]) -> WarmProcess:
    """``tilth run <repo>`` as its own process, its output in pipes."""
    return shared().popen(["run", str(repo)], stdout=PIPE, stderr=PIPE, env={**os.environ, **env})


def test_sighup_stops_the_run_like_ctrl_c(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, ONE_TASK)
    team = Team(recipes())
    with team_server(_slow_implementing(team)) as server:
        env = model_env(server.base_url)
        child = _popen(repo, env)
        deadline = time.monotonic() + 60
        while not any("submit_case" in str(r["body"].get("tools")) for r in server.requests):
            assert child.poll() is None and time.monotonic() < deadline, child.communicate()
            time.sleep(0.05)
        child.send_signal(signal.SIGHUP)
        out, err = child.communicate(timeout=60)
        assert child.returncode == 130, out + err
        assert "Traceback" not in err
        (stop,) = [e.payload for e in seeded.events() if e.type == "stop"]
        assert stop == {"reason": "interrupted", "detail": "the terminal was closed (SIGHUP)"}
        assert "── run summary ──" in out and "tilth resume" in out
        assert seeded.session.status == "running"
    with team_server(team) as server:
        resumed = tilth("resume", seeded.session.id, env=model_env(server.base_url))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert seeded.statuses() == {"T-001": "done"}


def test_a_closed_output_pipe_stops_the_run_like_ctrl_c(repo: Path, sessions_dir: Path) -> None:
    """``tilth run | head -1``: the reader goes away after one line (one task is enough:
    the run stops before it is done, and resume then finishes it)."""
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    with team_server(Team(recipes())) as server:
        env = model_env(server.base_url)
        child = _popen(repo, env)
        assert child.stdout is not None
        first = child.stdout.readline()
        child.stdout.close()  # as `head -1` does
        err = child.communicate(timeout=90)[1]
        assert first.strip()
        assert child.returncode == 130, err
        assert "Traceback" not in err and "Exception ignored" not in err
        stops = [e.payload for e in seeded.events() if e.type == "stop"]
        assert stops == [
            {"reason": "interrupted", "detail": "the stdout pipe was closed (SIGPIPE)"}
        ]
        assert "── run summary ──" in err  # what stdout could not take goes to stderr
        assert seeded.session.status == "running"
        assert set(seeded.statuses().values()) != {"done"}, "the run stopped before the end"
        resumed = tilth("resume", seeded.session.id, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert set(seeded.statuses().values()) == {"done"}


# ---- a full disk --------------------------------------------------------------------------------
@contextlib.contextmanager
def small_tmpfs(where: Path, size_kb: int) -> Iterator[Path]:
    """A tmpfs of ``size_kb`` mounted at ``where``; skips (visibly) where none can be made."""
    where.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        pytest.skip("cannot test a full disk here: no `mount` command")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot test a full disk here: mounting a tmpfs failed: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(disk: Path, leave: int = 0) -> Path:
    """Fill ``disk`` with one file, then free ``leave`` bytes of it again."""
    filler = disk / "filler.bin"
    with open(filler, "wb", buffering=0) as handle:
        chunk = b"\0" * 65536
        try:
            while True:
                handle.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def test_an_event_line_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", 256) as disk:
        log = EventLog(disk / "events.jsonl")
        log.append("session_start", {"source": "x"})
        before = log.path.read_bytes()
        fill(disk, leave=8192)
        with pytest.raises(StorageError) as caught:
            log.append("model_call", {"text": "y" * 100_000})
        assert caught.value.message == f"cannot write {log.path}: No space left on device"
        assert "free space" in (caught.value.hint or "")
        assert log.path.read_bytes() == before
        with pytest.raises(StorageError):
            append_line(disk / "other.jsonl", "z" * 100_000)
        assert (disk / "other.jsonl").read_bytes() == b""
        with pytest.raises(StorageError, match=r"cannot write .*state\.json: No space left"):
            atomic_write_json(disk / "state.json", {"big": "x" * 100_000})
        assert not (disk / "state.json").exists()
        assert [p.name for p in disk.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("room", [0, 24 * 1024, 64 * 1024])
def test_a_full_disk_during_a_run_is_a_one_line_error(tmp_path: Path, room: int) -> None:
    from tests.conftest import make_repo

    repo = make_repo(tmp_path / "repo")
    with small_tmpfs(tmp_path / "home", 2048) as home:
        seeded = seed_session(home / "sessions", repo, ONE_TASK)
        fill(home, leave=room)
        with team_server(Team(recipes())) as server:
            result = tilth("run", str(repo), env=model_env(server.base_url, TILTH_HOME=str(home)))
        assert result.returncode in (1, 2), result.stdout + result.stderr
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, result.stderr
        assert "No space left on device" in errors[0]
        assert str(seeded.session.dir) in errors[0]
        assert "Traceback" not in result.stderr and "unexpected" not in result.stderr
        assert seeded.session.events.path.read_bytes().endswith(b"\n")


# ---- no permission ----------------------------------------------------------------------------
def _without_permission() -> list[str]:
    """A command prefix under which file modes apply (root ignores them otherwise)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without `setpriv`: cannot make a permission error")
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search", "--"]


def _cli(prefix: list[str], *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, sys.executable, "-m", "tilth", *args],
        input="",
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=90,
    )


def _read_only(path: Path) -> None:
    for item in [path, *path.rglob("*")]:
        if not item.is_symlink() and "workspace" not in item.relative_to(path).parts:
            item.chmod(item.stat().st_mode & ~0o222)


def _writable(path: Path) -> None:
    for item in [path, *path.rglob("*")]:
        if not item.is_symlink():
            item.chmod(item.stat().st_mode | 0o200)


def test_read_only_session_directory(repo: Path, sessions_dir: Path) -> None:
    prefix = _without_permission()
    seeded = seed_session(sessions_dir, repo, ONE_TASK)
    sid = seeded.session.id
    env = model_env("http://127.0.0.1:9/v1")
    _read_only(seeded.session.dir)
    try:
        listed = _cli(prefix, "sessions", "--json", env=env)
        assert listed.returncode == 0, listed.stderr
        assert sid in listed.stdout
        shown = _cli(prefix, "checkpoints", sid, "--json", env=env)
        assert shown.returncode == 0, shown.stderr
        assert "Permission denied" in shown.stderr  # said, not fatal
        resumed = _cli(prefix, "resume", sid, env=env)
        assert resumed.returncode == 1, resumed.stdout + resumed.stderr
        errors = [line for line in resumed.stderr.splitlines() if line.startswith("error:")]
        assert errors == [f"error: cannot lock {seeded.session.dir / '.lock'}: Permission denied"]
        assert "hint: check the permissions" in resumed.stderr
        doctor = _cli(prefix, "doctor", sid, env=env)
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        assert "no problems found" in doctor.stdout
        drawn = _cli(prefix, "visualize", sid, env=env)
        assert drawn.returncode == 1
        assert f"cannot write {seeded.session.dir / 'chat.html'}: Permission denied" in drawn.stderr
        assert "Traceback" not in resumed.stderr + drawn.stderr + shown.stderr
    finally:
        _writable(seeded.session.dir)
    assert seeded.session.status == "prepared"


def test_a_listing_into_a_closed_pipe_ends_quietly(repo: Path, sessions_dir: Path) -> None:
    """``tilth sessions --json | head -1``: no traceback, nothing spilled onto stderr."""
    from tilth.session.store import Session

    # About 125 KB of listing: more than the pipe holds, so the writer meets the closed end.
    for _ in range(500):
        Session.create(sessions_dir, repo)
    child = shared().popen(["sessions", "--json"], stdout=PIPE, stderr=PIPE, env=dict(os.environ))
    assert child.stdout is not None and child.stderr is not None
    assert child.stdout.readline().strip() == "["
    child.stdout.close()
    err = child.stderr.read()
    child.wait(timeout=60)
    assert err == "", err
    assert child.returncode in (0, 1)
