"""A real PostgreSQL server for the queue tier (``make test-postgres``): ``initdb`` in a
temporary directory, started on loopback. PostgreSQL refuses to run as root, so under root
(CI) the server runs as ``nobody``. Missing binaries fail the tier under ``CI=true``."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

UNPRIVILEGED = 65534  # nobody


def _binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_server_user() -> list[str]:
    if os.geteuid() != 0:
        return []
    return ["setpriv", f"--reuid={UNPRIVILEGED}", f"--regid={UNPRIVILEGED}", "--clear-groups"]


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """``postgresql://`` URL of a fresh server on loopback, stopped afterwards."""
    binaries = _binaries()
    if binaries is None:
        message = "PostgreSQL server binaries (Debian package postgresql) are not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    # Not under pytest's temporary root: it is private to root, and the server runs as nobody.
    root = Path(tempfile.mkdtemp(prefix="tilth-postgres-"))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    if os.geteuid() == 0:
        os.chmod(root, 0o755)
        for path in (root, sockets):
            os.chown(path, UNPRIVILEGED, UNPRIVILEGED)
    user = _as_server_user()
    subprocess.run(
        [
            *user,
            str(binaries / "initdb"),
            "-D",
            str(data),
            "-U",
            "tilth",
            "--auth=trust",
            "-E",
            "UTF8",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    port = _free_port()
    server = subprocess.Popen(
        [
            *user,
            str(binaries / "postgres"),
            "-D",
            str(data),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-k",
            str(sockets),
            "-c",
            "fsync=off",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(root / "server.log", "w"),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while subprocess.run(
            [str(binaries / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
            capture_output=True,
        ).returncode:
            if server.poll() is not None or time.monotonic() > deadline:
                raise AssertionError((root / "server.log").read_text())
            time.sleep(0.2)
        subprocess.run(
            [
                str(binaries / "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "tilth",
                "tilth",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        yield f"postgresql://tilth@127.0.0.1:{port}/tilth"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(root, ignore_errors=True)
