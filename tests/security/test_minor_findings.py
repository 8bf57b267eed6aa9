"""Issue #24, findings 9 and 11: a malformed base URL is a failed doctor check, not a
crash; the web server closes connections that never send a whole request; Tilth's own
commits are never signed unless ``TILTH_SIGN_COMMITS=on``."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from agent.support import TASKS, model_env, recipes, seed_session, team_server, tilth
from web.support import serve

from tests.conftest import git
from tilth import git as tilth_git
from tilth.config import load_settings
from tilth.demo.script import Team
from tilth.errors import ConfigError, GitError
from tilth.web.timeouts import (
    HEADER_ENV,
    HEADER_SECONDS,
    DeadlineH11Protocol,
    deadline_protocol,
    header_seconds,
)


@pytest.mark.parametrize("base_url", ["not a url", "http://[::1"])
def test_a_malformed_base_url_fails_the_doctor_check(
    repo: Path, tilth_home: Path, base_url: str
) -> None:
    env = {"TILTH_BASE_URL": base_url, "TILTH_API_KEY": "sk-x", "TILTH_WORKER_MODEL": "m"}
    checked = tilth("doctor", str(repo), env=env)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "unexpected" not in checked.stderr
    assert "worker model" in checked.stdout and "check TILTH_BASE_URL" in checked.stdout


def test_the_header_deadline_is_ten_seconds_unless_the_environment_says() -> None:
    assert header_seconds({}) == HEADER_SECONDS == 10.0
    assert header_seconds({HEADER_ENV: " 0.5 "}) == 0.5
    for bad in ("soon", "0", "-1", "inf", "nan"):
        with pytest.raises(ConfigError, match=HEADER_ENV):
            header_seconds({HEADER_ENV: bad})
    protocol = deadline_protocol(0.5)
    assert issubclass(protocol, DeadlineH11Protocol) and protocol.header_seconds == 0.5
    assert DeadlineH11Protocol.header_seconds == HEADER_SECONDS


def test_connections_that_never_finish_a_request_are_closed(tilth_home: Path) -> None:
    # the deadline shortened through the environment: the same closing, without 10 s of waiting
    with serve({HEADER_ENV: "1"}) as served:
        netloc = urlsplit(served.url).netloc
        host, port = netloc.rsplit(":", 1)
        held = []
        for _ in range(20):
            sock = socket.create_connection((host, int(port)), timeout=5)
            sock.sendall(b"GET / HTTP/1.1\r\nHost: " + netloc.encode() + b"\r\nX-Slow: ")
            held.append(sock)
        idle = socket.create_connection((host, int(port)), timeout=5)  # sends nothing at all
        held.append(idle)
        deadline = time.monotonic() + 1 + 15
        for sock in held:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                assert sock.recv(1024) == b""  # closed by the server
            except ConnectionResetError:
                pass
            finally:
                sock.close()
        assert served.api("GET", "/api/sessions").status_code == 200  # still serving


def _failing_gpg(tmp_path: Path, repo: Path) -> Path:
    marker = tmp_path / "gpg-ran"
    program = tmp_path / "gpg"
    program.write_text(f"#!/bin/sh\necho ran >> {marker}\nexit 1\n")
    program.chmod(0o755)
    git(repo, "config", "commit.gpgsign", "true")
    git(repo, "config", "gpg.program", str(program))
    return marker


def test_tilth_commits_are_never_signed_by_default(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    marker = _failing_gpg(tmp_path, repo)
    load_settings()  # the default: unsigned
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    with team_server(Team(recipes())) as server:
        ran = tilth("run", str(repo), env=model_env(server.base_url))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert seeded.statuses() == {"T-001": "done"}
    assert not marker.exists()


def test_signing_is_a_setting(repo: Path, tilth_home: Path, tmp_path: Path) -> None:
    marker = _failing_gpg(tmp_path, repo)
    (repo / "new.txt").write_text("x\n")
    try:
        load_settings({**os.environ, "TILTH_SIGN_COMMITS": "on"})
        with pytest.raises(GitError):
            tilth_git.commit_all(repo, "signed, or not at all")
    finally:
        load_settings()
    assert marker.exists()
