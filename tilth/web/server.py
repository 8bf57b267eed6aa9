"""Running the web UI: bind loopback, print the tokened URL first, serve until Ctrl-C."""

from __future__ import annotations

import errno
import os
import socket
import sys
import threading
import webbrowser
from typing import Any, TextIO

from tilth.config import Settings
from tilth.errors import UsageError
from tilth.web.security import new_token

HOST = "127.0.0.1"
GRACEFUL_SECONDS = 3


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:``port`` (0 picks a free port)."""
    # IPPROTO_TCP explicitly: asyncio turns Nagle off (TCP_NODELAY) only on sockets whose
    # proto says TCP; with proto 0 every keep-alive response waits ~40 ms for a delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(
                f"port {port} on {HOST} is in use", hint="pick another with --port, or --port 0"
            ) from None
        raise UsageError(f"cannot listen on {HOST}:{port}: {exc.strerror}") from None
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


def serve(
    settings: Settings,
    port: int,
    *,
    open_browser: bool,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Serve until interrupted; the first line on stdout is the URL to open."""
    import uvicorn

    from tilth.web.app import create_app
    from tilth.web.timeouts import IDLE_SECONDS, deadline_protocol, header_seconds

    out, err = stdout or sys.stdout, stderr or sys.stderr
    protocol = deadline_protocol(header_seconds(os.environ))
    sock = bind(port)
    actual = sock.getsockname()[1]
    token = new_token()
    url = f"http://{HOST}:{actual}/?token={token}"
    out.write(url + "\n")
    out.flush()
    err.write(f"tilth serve: sessions in {settings.sessions_dir}; loopback only; Ctrl-C stops\n")
    err.flush()
    app = create_app(settings, token, actual)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_SECONDS,
        http=protocol,
        timeout_keep_alive=int(IDLE_SECONDS),
    )
    server = uvicorn.Server(config)
    stop_streams(server, app)
    if open_browser:
        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass  # uvicorn re-raises the Ctrl-C it handled; stopping the server is the normal end
    finally:
        sock.close()
    return 0


def stop_streams(server: Any, app: Any) -> None:
    """On Ctrl-C or SIGTERM, end the event streams and cancel running chat turns first, so
    open pages and a model that does not answer do not hold up the shutdown."""
    import asyncio

    handle_exit = server.handle_exit

    def on_exit(sig: int, frame: Any) -> None:
        handle_exit(sig, frame)
        app.state.chats.cancel_turns()  # each turn's reply then ends as cancelled
        watches = app.state.watches  # app is the Guard; its state is the ServerState
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        loop.call_soon_threadsafe(lambda: asyncio.ensure_future(watches.close()))

    server.handle_exit = on_exit
