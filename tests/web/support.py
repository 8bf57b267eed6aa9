"""Shared set-up for the web tests: sessions made by a scripted run, and the real server.

A session is seeded with the Session API (as tests/agent/support.py does) and run by
the real ``tilth run`` against the loopback fake server; ``Served`` starts the real
``tilth serve --port 0 --no-open`` in a subprocess and reads the URL it prints first.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from tests.agent.support import PACKAGE, TASKS, model_env, recipes, seed_session, tilth
from tests.conftest import make_repo
from tests.warm_cli import PIPE, WarmProcess
from tests.warm_cli import shared as shared_warm_cli
from tilth.demo.script import Recipe, Team
from tilth.model import FakeServer, Script
from tilth.session.files import atomic_write_json
from tilth.session.store import Session
from tilth.timeline import Recorder

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests-artifacts"
"""Screenshots and other test artefacts (listed in .gitignore)."""

# Model-written text that would run if a page ever parsed it as HTML.
XSS_SCRIPT = "<script>window.__tilth_xss = 'script'</script>"
XSS_IMG = "<img src=x onerror=\"window.__tilth_xss = 'img'\">"
XSS_LINK = "javascript:window.__tilth_xss='link'"
XSS_ALL = f"{XSS_SCRIPT} {XSS_IMG} {XSS_LINK}"


@dataclass
class Built:
    """A session made by a scripted ``tilth run``, and the server that played the model."""

    session: Session
    repo: Path
    worktree: Path
    seed_sha: str
    env: dict[str, str]

    @property
    def id(self) -> str:
        return self.session.id


def build_session(
    root: Path,
    server: FakeServer,
    tasks: list[dict[str, Any]] = TASKS[:2],
    *,
    tldr: str | None = None,
    run: bool = True,
) -> Built:
    """Seed a session of a fresh repo under ``root`` and (optionally) run it to the end."""
    repo = make_repo(root / "repo", PACKAGE)
    seeded = seed_session(Path(os.environ["TILTH_HOME"]) / "sessions", repo, tasks)
    if tldr is not None:
        atomic_write_json(seeded.session.seed_meta_path, {"tldr": tldr, "tokens": {"total": 0}})
    Recorder(seeded.session, seeded.worktree).seed()
    env = model_env(server.base_url)
    if run:
        done = tilth("run", str(repo), env=env)
        assert done.returncode == 0, done.stdout + done.stderr
    return Built(seeded.session, repo, seeded.worktree, seeded.seed_sha, env)


def xss_team() -> tuple[Team, list[dict[str, Any]]]:
    """A team whose every model-written field carries markup, and tasks that do too."""
    tasks = [
        {
            **TASKS[0],
            "title": f"Count words {XSS_ALL}",
            "description": f"Describe {XSS_IMG}",
            "acceptance_criteria": [f"criterion {XSS_SCRIPT}", XSS_LINK],
        }
    ]
    good = recipes()["T-001"]
    content = good.files["textkit/words.py"]
    team = Team(
        {
            "T-001": Recipe(
                files={"textkit/words.py": content + f"# {XSS_SCRIPT}\n"},
                fixed={"textkit/words.py": content + f"# FIXED {XSS_IMG}\n"},
                accept_when="FIXED",
                concern=f"concern {XSS_ALL}",
                next_step=f"next {XSS_IMG}",
                probes=[_bash(f"echo '{XSS_IMG}'")],
                test_command="true",
            )
        }
    )
    return team, tasks


def _bash(command: str) -> dict[str, Any]:
    from tilth.model.script import tool_call

    return tool_call("bash", command=command)


@contextmanager
def fake_model(team: Team | Any) -> Iterator[FakeServer]:
    server = FakeServer(Script(team)).start()
    try:
        yield server
    finally:
        server.stop()


@dataclass
class Served:
    """A running ``tilth serve`` subprocess."""

    url: str
    process: WarmProcess

    @property
    def base(self) -> str:
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def token(self) -> str:
        return self.url.split("token=", 1)[1]

    def client(self, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token}"}
        kwargs.setdefault("timeout", 30)
        return httpx.Client(base_url=self.base, headers=headers, **kwargs)

    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        with self.client() as client:
            return client.request(method, path, json=body)


@contextmanager
def serve(env: Mapping[str, str] | None = None, port: int = 0) -> Iterator[Served]:
    """The real ``tilth serve --port <port> --no-open``; stopped with SIGINT afterwards."""
    process = shared_warm_cli().popen(
        ["serve", "--port", str(port), "--no-open"],
        stdout=PIPE,
        stderr=PIPE,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), (url, _stderr(process))
        served = Served(url, process)
        _wait_ready(served)
        yield served
    finally:
        hung = _stop(process)
    # Every test also checks that Ctrl-C ends the server at once (after the test's own
    # failure, if any, which this would otherwise hide).
    assert not hung, "tilth serve did not stop within 15 s of Ctrl-C"


def _wait_ready(served: Served, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if served.api("GET", "/api/sessions").status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or served.process.poll() is not None:
            raise AssertionError(f"tilth serve did not answer: {_stderr(served.process)}")
        time.sleep(0.05)


def _stderr(process: WarmProcess) -> str:
    if process.poll() is None or process.stderr is None:
        return ""
    return process.stderr.read()


def _stop(process: WarmProcess) -> bool:
    """Ctrl-C, as a person stops it; True when the server had to be killed."""
    hung = False
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            hung = True
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    return hung


def wait_for(check: Any, timeout: float = 30, what: str = "condition") -> Any:
    """Poll ``check()`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@contextmanager
def serve_in_thread(make_app: Any) -> Iterator[str]:
    """``make_app(port)`` on uvicorn in this process (for objects a subprocess cannot take).

    Yields the base URL; the server is stopped (its lifespan shutdown run) afterwards.
    """
    import threading

    import uvicorn

    from tilth.web.server import bind

    sock = bind(0)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        make_app(port), log_level="warning", lifespan="on", timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started, 20, "the in-process server")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)
        sock.close()


def in_own_thread(work: Any) -> Any:
    """Run ``work`` on a fresh thread: Playwright's sync API keeps a loop on this one."""
    import threading

    out: list[Any] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            out.append(work())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return out[0]
