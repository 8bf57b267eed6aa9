"""The sandbox's read-only filesystem does not stop ``connect()``: the services it lists are
masked.

A unix socket on a read-only mount still accepts connections. On a desktop that is the
session bus (``systemd-run --user`` runs any command outside the sandbox), a Docker
socket (root), the gpg or ssh agent. Every socket bound when a command starts is covered
by an empty file inside the sandbox, and the user's runtime directory is hidden.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from security.conftest import require_backend
from tilth.config import load_settings
from tilth.tools import ToolBox
from tilth.tools.sandbox import make_sandbox, sandbox_for

CONNECT = (
    'python3 -c "import socket, sys; s = socket.socket(socket.AF_UNIX)\n'
    "try:\n    s.connect(sys.argv[1]); s.sendall(b'from-the-sandbox'); print('CONNECTED')\n"
    "except OSError as e:\n    print('REFUSED', e.errno)\" "
)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[Path, list[bytes]]]:
    """A unix socket listening in a directory the sandbox shows read-only."""
    require_backend("bwrap")  # Landlock cannot refuse connect(): docs/security.md
    shown = tmp_path / "src"
    shown.mkdir()
    path = shown / "svc.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    server.settimeout(10)
    received: list[bytes] = []

    def serve() -> None:
        try:
            conn, _ = server.accept()
            received.append(conn.recv(100))
            conn.close()
        except OSError:
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield path, received
    finally:
        if thread.is_alive():  # nobody connected: wake accept() rather than wait it out
            with socket.socket(socket.AF_UNIX) as knock:
                knock.connect(str(path))
        thread.join(timeout=5)
        server.close()


def test_a_service_socket_outside_is_not_reachable(
    tmp_path: Path, service: tuple[Path, list[bytes]]
) -> None:
    path, received = service
    work = tmp_path / "ws"
    work.mkdir()
    box = ToolBox(work, sandbox=make_sandbox(work, readable=[path.parent]), bash_timeout=20)
    shown = box.dispatch("bash", {"command": f"ls {path.parent}; {CONNECT}{path}"}).result
    assert "svc.sock" in shown  # the directory is readable...
    assert "REFUSED" in shown and "CONNECTED" not in shown, shown  # ...its service is not
    assert received == []


def test_the_workers_own_sockets_still_work(tmp_path: Path) -> None:
    require_backend("bwrap")  # Landlock cannot refuse connect(): docs/security.md
    work = tmp_path / "ws"
    work.mkdir()
    box = ToolBox(work, sandbox=make_sandbox(work), bash_timeout=20)
    serve = (
        "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.bind('own.sock'); "
        's.listen(1); c, _ = s.accept(); print(c.recv(100).decode())" & sleep 0.5; '
    )
    shown = box.dispatch("bash", {"command": f"{serve}{CONNECT}own.sock; wait"}).result
    assert "CONNECTED" in shown and "from-the-sandbox" in shown, shown


def test_the_users_runtime_directory_is_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``$XDG_RUNTIME_DIR`` holds sockets made after a command starts (a bus, an agent)."""
    require_backend("bwrap")  # Landlock cannot refuse connect(): docs/security.md
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    settings = load_settings({"TILTH_HOME": str(tmp_path / "home")})
    work = tmp_path / "ws"
    work.mkdir()
    sandbox = sandbox_for(settings, work)
    assert sandbox is not None
    argv = sandbox.wrap(["true"])
    assert ["--tmpfs", str(runtime.resolve())] in [argv[i : i + 2] for i in range(len(argv))]
