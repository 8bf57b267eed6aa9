"""The e2e lab: scripted model servers, a story session built once, and exact copies of it.

Every e2e test drives the real CLI against loopback fake servers: in the test's
process where only the command's work and output are checked, in a subprocess where
signals, the process's environment or its working directory are the point.
Building a session through ``prep-feature`` + ``run`` costs seconds, so the lab builds each
interesting state once and saves it; a test then restores an exact byte copy *at the same
absolute path* (``<root>/live``), so git worktree links, ``checkpoint.json`` paths and event
byte offsets are all valid without any repair.
Only one live copy exists at a time; tests run one after another.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import GIT_IDENTITY, run_cli, run_cli_in_process
from tests.sessionview import SessionView
from tests.warm_cli import PIPE, WarmProcess, shared
from tilth.demo.script import Interview, Team
from tilth.demo.story import demo_team
from tilth.model import FakeServer, Script
from tilth.model.script import Reply, delay, empty, error, reply, tool_call
from tilth.session.events import read_json_objects
from tilth.session.session_record import SessionRecord

MODEL = "tilth-e2e-model"
"""One model name for every role: routing must go by role, never by name."""
STALL_MODEL = "stall-worker"
ERROR_MODEL = "error-worker"
SLOW_MODEL = "slow-worker"
EMPTY_MODEL = "empty-worker"
QUIET_MODEL = "quiet-worker"
SLOW_IMPLEMENTER = "slow-implementer"
MUMBLING_EVALUATOR = "mumbling-evaluator"
"""Answers every review in prose, never calling submit_verdict."""
"""Plans normally, then hangs in its first implementing call (to be interrupted there)."""
EAGER_MODEL = "eager-worker"
"""Submits its case before writing any code (the seed tests must still fail)."""

KEYS = {
    "worker": "sk-e2e-WORKER-5d1c0b7e93a4",
    "evaluator": "sk-e2e-EVALUATOR-8e2f61aa07c9",
    "prep": "sk-e2e-PREP-3b9d4c2e1f60",
}
SECRET = "E2E-OUTSIDE-SECRET-41c7"
XSS = "<script>alert('tilth-e2e')</script>"
ANSWER = "1\n"
ANSWER_TEXT = "yes, keep digits"
DOTS = "../" * 12
TINY_CLOCK = "0.0000001"
"""A wall-clock budget (minutes) that trips before the first model call."""
BASH_FILE = "from_bash.txt"
BASH_MADE = "made-by-bash"


def tool_names(request: dict[str, Any]) -> set[str]:
    return {str(t.get("function", {}).get("name")) for t in request.get("tools") or []}


def probes(outside: Path) -> list[dict[str, Any]]:
    """Tool calls that try to leave the worktree (plus an env dump hunting for keys)."""
    abs_secret = str(outside / "secret.txt")
    return [
        tool_call("read_file", path=abs_secret),
        tool_call("read_file", path=DOTS + abs_secret.lstrip("/")),
        tool_call("read_file", path="outside_link/secret.txt"),
        tool_call("write_file", path=str(outside / "pwned.txt"), content="pwned\n"),
        tool_call("write_file", path="outside_link/pwned2.txt", content="pwned\n"),
        tool_call("edit_file", path="outside_link/secret.txt", old_string="E2E", new_string="X"),
        tool_call("edit_file", path=abs_secret, old_string="E2E", new_string="X"),
        tool_call("glob", pattern="outside_link/*"),
        tool_call("glob", pattern=str(outside) + "/*"),
        tool_call("glob", pattern=DOTS + str(outside).lstrip("/") + "/*"),
        tool_call("grep", pattern=SECRET),
        tool_call("grep", pattern=SECRET, path_glob="outside_link/*"),
        tool_call("grep", pattern=SECRET, path_glob=DOTS + str(outside).lstrip("/") + "/*"),
        tool_call("bash", command="env; cat /proc/$PPID/environ | tr '\\0' '\\n'"),
        tool_call("bash", command=f"echo {BASH_MADE} > {BASH_FILE}"),
    ]


@dataclass
class StoryScript:
    """The demo's scripted team, with T-002 on tier L2 and a few test-only personalities."""

    outside: Path
    team: Team = field(init=False)

    def __post_init__(self) -> None:
        team = demo_team()
        assert team.interview is not None
        tasks = [dict(task) for task in team.interview.prd_entries]
        tasks[0]["title"] = f"Count words {XSS}"
        tasks[1]["tier"] = "L2"
        team.interview = Interview(
            question=team.interview.question,
            options=team.interview.options,
            prd_entries=tasks,
            test_files=team.interview.test_files,
            tldr=f"{team.interview.tldr} {XSS}",
        )
        for recipe in team.recipes.values():
            recipe.test_command = "true"  # the harness runs the seed tests itself
        team.recipes["T-001"].probes = probes(self.outside)
        self.team = team

    def __call__(self, model: str, request: dict[str, Any]) -> Reply:
        tools = tool_names(request)
        if not tools:  # `tilth summarize` asks the worker role for plain text
            return reply("(scripted) summary: the worker wrote files and ran the tests.")
        is_worker = not tools & {"write_seed", "submit_verdict"}
        if "submit_verdict" in tools and model == MUMBLING_EVALUATOR:
            return reply("(scripted) Looks fine to me, ship it.")
        if is_worker and model == STALL_MODEL:
            return reply("(scripted) still thinking", tool_call("bash", command="echo working"))
        if is_worker and model == EMPTY_MODEL:
            return empty()
        if is_worker and model == QUIET_MODEL:
            return reply("(scripted) I am thinking about it.")
        if is_worker and model == ERROR_MODEL:
            return error(500, "scripted outage")
        if is_worker and model == SLOW_IMPLEMENTER and "submit_case" in tools:
            return delay(60, reply("(scripted) too late"))
        if is_worker and model == SLOW_MODEL:
            return delay(60, reply("(scripted) too late"))
        fresh = not any(m.get("role") == "tool" for m in request.get("messages") or [])
        if is_worker and model == EAGER_MODEL and "submit_case" in tools and fresh:
            coverage = [{"criterion": "all of them", "addressed_by": "textutils/count.py"}]
            return reply(None, tool_call("submit_case", summary="done", ac_coverage=coverage))
        answer = self.team(model, request)
        if is_worker:
            answer = {**answer, "content": f"{answer.get('content') or ''} {XSS}".strip()}
        return answer


@dataclass
class Servers:
    """One fake server per role, each with its own API key."""

    worker: FakeServer
    evaluator: FakeServer
    prep: FakeServer

    def env(self) -> dict[str, str]:
        return {
            "TILTH_BASE_URL": self.worker.base_url,
            "TILTH_API_KEY": KEYS["worker"],
            "TILTH_WORKER_MODEL": MODEL,
            "TILTH_EVALUATOR_BASE_URL": self.evaluator.base_url,
            "TILTH_EVALUATOR_API_KEY": KEYS["evaluator"],
            "TILTH_EVALUATOR_MODEL": MODEL,
            "TILTH_PREP_BASE_URL": self.prep.base_url,
            "TILTH_PREP_API_KEY": KEYS["prep"],
            "TILTH_PREP_MODEL": MODEL,
            "TILTH_MODEL_BACKOFF_SECONDS": "0.001",
            "TILTH_EMPTY_BACKOFF_SECONDS": "0",
            "TILTH_MODEL_MAX_RETRIES": "0",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        }

    def all(self) -> list[FakeServer]:
        return [self.worker, self.evaluator, self.prep]

    def stop(self) -> None:
        for server in self.all():
            server.stop()


def start_servers(script: StoryScript) -> Servers:
    return Servers(*(FakeServer(Script(script)).start() for _ in range(3)))


def bodies(server: FakeServer) -> list[dict[str, Any]]:
    return [r["body"] for r in server.requests if isinstance(r["body"], dict)]


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_IDENTITY}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every complete JSON-object line of ``path`` (events: ``Lab.session().records()``)."""
    return read_json_objects(path)


@dataclass
class Live:
    """The session world currently restored at ``<root>/live``."""

    root: Path
    env: dict[str, str]

    @property
    def live(self) -> Path:
        return self.root / "live"

    @property
    def proj(self) -> Path:
        return self.live / "proj"

    @property
    def home(self) -> Path:
        return self.live / "home"

    @property
    def sessions(self) -> Path:
        return self.home / "sessions"

    def session_ids(self) -> list[str]:
        if not self.sessions.is_dir():
            return []
        return sorted(p.name for p in self.sessions.iterdir() if p.is_dir())

    @property
    def sid(self) -> str:
        ids = self.session_ids()
        assert ids, "no session"
        return ids[0]

    def sdir(self, sid: str | None = None) -> Path:
        return self.sessions / (sid or self.sid)

    def worktree(self, sid: str | None = None) -> Path:
        return self.sdir(sid) / "workspace"

    def cli(
        self,
        *args: str,
        input_text: str | None = None,
        timeout: float = 90,
        unset: tuple[str, ...] = (),
        settings: dict[str, str] | None = None,
        process: bool = False,
        **extra: str,
    ) -> subprocess.CompletedProcess[str]:
        """The CLI against this world; ``settings``/``extra`` add env, ``unset`` removes names.

        In this process (every path is given on the command line, so no working directory is
        needed), unless ``process`` asks for a real ``python -m tilth`` in ``<root>/live``:
        where the process itself is the point (its environment as its children see it, a
        working directory of its own) or ``unset`` must remove names from the environment.
        """
        env = {**self.env, "TILTH_HOME": str(self.home), **(settings or {}), **extra}
        for name in unset:
            env.pop(name, None)
        if not process and not unset:
            return run_cli_in_process(*args, input_text=input_text or "", env=env)
        return run_cli(*args, input_text=input_text, env=env, cwd=self.live, timeout=timeout)

    def popen(self, *args: str, **extra: str) -> WarmProcess:
        env = {**os.environ, **self.env, "TILTH_HOME": str(self.home), **extra}
        env.pop("TILTH_DEBUG", None)
        return shared().popen(list(args), stdout=PIPE, stderr=PIPE, env=env, cwd=self.live)

    # ---- reading the session ----------------------------------------------------------
    def session(self, sid: str | None = None) -> SessionView:
        return SessionView.at(self.sdir(sid))

    def events(self, sid: str | None = None) -> list[dict[str, Any]]:
        return self.session(sid).records()

    def types(self, sid: str | None = None) -> list[str]:
        return self.session(sid).types()

    def of_type(self, kind: str, sid: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events(sid) if e["type"] == kind]

    def checkpoint(self, sid: str | None = None) -> dict[str, Any]:
        return self.record(sid).to_dict()

    def record(self, sid: str | None = None) -> SessionRecord:
        return self.session(sid).record()

    def prd(self, sid: str | None = None) -> list[dict[str, Any]]:
        return self.session(sid).prd()

    def statuses(self, sid: str | None = None) -> dict[str, str]:
        return self.session(sid).statuses()

    def head(self, sid: str | None = None) -> str:
        return git(self.worktree(sid), "rev-parse", "HEAD").strip()

    def subjects(self, since: str, sid: str | None = None) -> list[str]:
        out = git(self.worktree(sid), "log", "--format=%s", f"{since}..HEAD")
        return list(reversed(out.splitlines()))

    def porcelain(self, sid: str | None = None) -> str:
        return git(self.worktree(sid), "status", "--porcelain", "--untracked-files=all")

    def seed_sha(self, sid: str | None = None) -> str:
        return str(self.of_type("seed_committed", sid)[-1]["payload"]["sha"])

    def checkpoints(self, sid: str | None = None) -> list[dict[str, Any]]:
        done = self.cli("checkpoints", sid or self.sid, "--json")
        assert done.returncode == 0, done.stderr
        data: list[dict[str, Any]] = json.loads(done.stdout)
        return data


class Lab:
    """Saved states of the story and a way to bring one back at ``<root>/live``."""

    def __init__(self, root: Path, servers: Servers, script: StoryScript) -> None:
        self.root = root
        self.servers = servers
        self.script = script
        self.saved: dict[str, Path] = {}
        self.notes: dict[str, Any] = {}
        self.world = Live(root, servers.env())

    def save(self, name: str) -> None:
        target = self.root / "saved" / name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(self.world.live, target, symlinks=True)
        self.saved[name] = target

    def restore(self, name: str) -> Live:
        self.clear()
        shutil.copytree(self.saved[name], self.world.live, symlinks=True)
        return self.world

    def clear(self) -> None:
        shutil.rmtree(self.world.live, ignore_errors=True)


def build_project(root: Path) -> Path:
    """The demo project as the user's repo, plus a committed symlink leading outside it."""
    import tilth.demo

    outside = root / "outside"
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    proj = root / "live" / "proj"
    shutil.copytree(Path(tilth.demo.__file__).parent / "project", proj)
    for cache in proj.rglob("__pycache__"):
        shutil.rmtree(cache)
    (proj / "outside_link").symlink_to(outside, target_is_directory=True)
    git(proj, "init", "-q", "-b", "main")
    git(proj, "add", "-A")
    git(proj, "commit", "-q", "-m", "initial")
    return proj


def iter_files(root: Path) -> Iterator[Path]:
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            yield path


def prep_that_never_finishes(world: Live) -> str:
    """A session whose interview failed before any seed was written; returns its id."""
    from tests.conftest import make_repo
    from tilth.model import FakeServer, Script

    proj = make_repo(world.live / "proj")
    with FakeServer(Script(lambda model, request: error(400, "no such model"))) as server:
        prep = world.cli(
            "prep-feature", str(proj), "--brief", "x", TILTH_PREP_BASE_URL=server.base_url
        )
    assert prep.returncode != 0, prep.stdout
    (sid,) = world.session_ids()
    return sid


def interrupt_run(
    world: Live, servers: Servers, *args: str, model: str = SLOW_MODEL, **extra: str
) -> tuple[subprocess.CompletedProcess[str], int]:
    """Start ``tilth <args>``, wait for its (hanging) worker call, Ctrl-C it; (result, calls)."""
    import signal
    import time

    seen = len(bodies(servers.worker))
    child = world.popen(*args, TILTH_WORKER_MODEL=model, **extra)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert child.poll() is None, child.communicate()
            late = bodies(servers.worker)[seen:]
            if model != SLOW_IMPLEMENTER and late:
                break
            if any("submit_case" in tool_names(b) for b in late):
                break
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    done = subprocess.CompletedProcess(child.args, child.returncode, out, err)
    return done, len(bodies(servers.worker)) - seen


def dir_digest(root: Path, skip: tuple[str, ...] = (".lock",)) -> dict[str, str]:
    """sha256 of every session file (the worktree aside), to prove nothing changed."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("workspace") or path.name in skip or not path.is_file():
            continue
        out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out
