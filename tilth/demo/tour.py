"""``tilth demo``: the whole story, end to end, through the real CLI verbs.

The bundled project is copied to a temporary directory and made a git repository;
a loopback fake server answers as the scripted team (``--live`` uses the configured
endpoint instead). Each step runs ``python -m tilth <verb>`` as a child process, so
what the demo shows is exactly what a user would get. A step whose verb is not in
this build is skipped with a note.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tilth import git
from tilth.config import find_env_file, load_settings
from tilth.demo.script import EVALUATOR, INTERVIEWER, WORKER
from tilth.demo.story import ANSWERS, BRIEF, demo_team, test_command
from tilth.errors import Interrupted, TilthError
from tilth.model import FakeServer, Script
from tilth.session.discovery import sessions_for
from tilth.session.store import Session

PROJECT = Path(__file__).resolve().parent / "project"
SCRIPTED_NOTE = (
    "The model in this demo is SCRIPTED: a local fake server plays the interviewer, the worker "
    "and the evaluator from a fixed story. No network, no real model."
)
DEMO_API_KEY = "demo-key-not-a-secret"


class Lines(Protocol):
    """Where the tour's own lines go: the CLI's terminal ``IO`` (never imported here)."""

    def say(self, text: str = "", style: str | None = None) -> None: ...

    def dim(self, text: str) -> None: ...

    def warn(self, text: str) -> None: ...


class DemoFailed(TilthError):
    """A demo step ended with an unexpected exit code."""


@dataclass(frozen=True)
class DemoOptions:
    """How ``tilth demo`` was invoked."""

    live: bool = False
    keep: bool = False
    """Put the session in the configured TILTH_HOME (so ``tilth sessions`` lists it later)."""
    home: Path | None = None
    """An explicit TILTH_HOME for the demo."""


@dataclass(frozen=True)
class Step:
    """One CLI invocation of the story."""

    title: str
    argv: list[str]
    needs: tuple[str, ...]
    """Modules that must exist for the verb to be available."""
    ok: tuple[int, ...] = (0,)


class Tour:
    """Runs the demo's steps in order and reports where everything ended up."""

    def __init__(self, out: Lines, options: DemoOptions, root: Path) -> None:
        self.out = out
        self.options = options
        self.root = root
        self.project = self.root / "textutils"
        self.home = options.home or (None if options.keep else self.root / "home")
        self.server: FakeServer | None = None
        self.number = 0
        self._live_runner: str | None = None

    # ---- the story ----------------------------------------------------------------------------
    def run(self) -> int:
        """Run every step; 0 when the story completed."""
        self.out.say(f"working directory: {self.root}")
        self._make_project()
        try:
            if not self.options.live:
                self.server = FakeServer(Script(demo_team(sys.executable))).start()
            self._story()
        finally:
            if self.server is not None:
                self.server.stop()
        return 0

    def _story(self) -> None:
        project = str(self.project)
        answers = self.root / "answers.txt"
        answers.write_text(ANSWERS, encoding="utf-8")
        prep = ["prep-feature", project, "--brief", BRIEF]
        if not self.options.live:
            prep += ["--answers", str(answers)]
        self.step(Step("interview → seed (tasks + acceptance tests)", prep, ("tilth.cli.prep",)))
        session = self._session()
        if session is None:
            self.out.warn("no session was prepared; the remaining steps need one")
            return
        sid = session.id
        run = Step("run: worker and evaluator work through the tasks", ["run", project], RUN)
        self.step(run)
        self.step(
            Step(
                "reset --to-seed: back to the instant the seed was written",
                ["reset", sid, "--to-seed", "-y"],
                ("tilth.cli.reset", "tilth.timeline.rewind.seed_reset"),
            )
        )
        self.step(Step("run again from the seed", ["run", project], RUN))
        last = _last_task(session)
        self.step(
            Step(
                f"rewind: code and conversation back to {last}'s planning stage",
                ["rewind", sid, "--to", f"{last}/planning", "-y"],
                ("tilth.cli.timeline",),
            )
        )
        self.step(Step("resume from the rewound point", ["resume", sid], RUN))
        self.step(
            Step(
                f"restart {last} from its code_review stage",
                ["restart", sid, last, "--from", "code_review", "-y"],
                ("tilth.cli.timeline",),
            )
        )
        self.step(Step("resume: the review and verification run again", ["resume", sid], RUN))
        self.step(Step("visualize: render chat.html", ["visualize", sid], ("tilth.cli.visualize",)))
        self._finale(session)

    # ---- steps ----------------------------------------------------------------------------------
    def step(self, step: Step) -> int | None:
        """Run one step (or skip it when its verb is missing); raise when it fails."""
        self.number += 1
        self.out.say("")
        self.out.say(f"── {self.number}. {step.title} ──", style="bold cyan")
        missing = [m for m in step.needs if importlib.util.find_spec(m) is None]
        if missing:
            self.out.say(f"skipped: `tilth {step.argv[0]}` is not available in this build yet")
            return None
        self.out.dim("$ " + shlex.join(["tilth", *step.argv]))
        child = subprocess.Popen(
            [sys.executable, "-m", "tilth", *step.argv],
            env=self._env(),
            cwd=self.root,
            stdin=None if self.options.live else subprocess.DEVNULL,
        )
        try:
            code = child.wait()
        except KeyboardInterrupt:
            # The child got the Ctrl-C too: let it save its state and stop before we do.
            child.wait()
            again = "tilth demo --live" if self.options.live else "tilth demo"
            raise Interrupted(
                f"the demo was interrupted at step {self.number} (`tilth {step.argv[0]}`)",
                hint=f"its files are kept in {self.root}; `{again}` starts the story again",
            ) from None
        if code not in step.ok:
            raise DemoFailed(
                f"demo step {self.number} (`tilth {step.argv[0]}`) exited with {code}",
                hint=f"the demo's files are kept in {self.root} for a look",
            )
        return code

    def _env(self) -> dict[str, str]:
        live = self.options.live
        keep = ("TILTH_HOME", "TILTH_SESSIONS_DIR") if self.home is None else ()
        env = {
            k: v for k, v in os.environ.items() if live or not k.startswith("TILTH_") or k in keep
        }
        if self.home is not None:
            env.pop("TILTH_SESSIONS_DIR", None)
            env["TILTH_HOME"] = str(self.home)
        if live:
            # The demo's TILTH_HOME has no .env: point at the user's settings explicitly.
            env_file = find_env_file(os.environ)
            if env_file is not None:
                env["TILTH_ENV_FILE"] = str(env_file)
        elif self.server is not None:
            env.update(
                TILTH_BASE_URL=self.server.base_url,
                TILTH_API_KEY=DEMO_API_KEY,
                TILTH_WORKER_MODEL=WORKER,
                TILTH_EVALUATOR_MODEL=EVALUATOR,
                TILTH_PREP_MODEL=INTERVIEWER,
                TILTH_MODEL_MAX_RETRIES="0",
                TILTH_EMPTY_BACKOFF_SECONDS="0",
            )
        env.pop("TILTH_SETUP_COMMAND", None)
        env.pop("TILTH_TEST_COMMAND", None)
        runner = self._runner_command(env)
        if runner is not None:
            env["TILTH_TEST_COMMAND"] = runner
        return env

    def _runner_command(self, env: dict[str, str]) -> str | None:
        """The project's stdlib runner as TILTH_TEST_COMMAND, unless a live model may need more.

        The example project has no dependencies and ships ``run_tests.py``, so the scripted
        demo always names it: a plain ``pip install tilth`` (no pytest) can play the story.
        A live interviewer may write tests that use pytest itself; then a ``python3`` with
        pytest on PATH is preferred when there is one (the project's normal environment).
        """
        if not self.options.live:
            return test_command(sys.executable)
        if self._live_runner is None:
            from tilth.environment.project import check_project_env, resolve_project_env
            from tilth.errors import ProjectEnvError

            try:
                found = resolve_project_env(self.project, self.project, load_settings(env))
                check_project_env(found, self.project)
                self._live_runner = ""
            except (ProjectEnvError, TilthError):
                self._live_runner = test_command(sys.executable)
        return self._live_runner or None

    # ---- set-up and reporting --------------------------------------------------------------------
    def _make_project(self) -> None:
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
        shutil.copytree(PROJECT, self.project, ignore=ignore)
        git.git("init", "-q", "-b", "main", cwd=self.project)
        git.commit_all(self.project, "textutils: initial version")
        self.out.dim(f"example project: {self.project} (a git repository on main)")

    def _sessions_dir(self) -> Path:
        env = self._env()
        return load_settings(env).sessions_dir

    def _session(self) -> Session | None:
        found = sessions_for(self._sessions_dir(), self.project)
        return found[-1] if found else None

    def _finale(self, session: Session) -> None:
        self.out.say("")
        self.out.say("── demo finished ──", style="bold green")
        self.out.say(f"project   {self.project}")
        self.out.say(f"session   {session.dir}")
        self.out.say(f"branch    {session.branch}   (git -C {self.project} log {session.branch})")
        chat = session.chat_html_path
        self.out.say(f"chat.html {chat if chat.exists() else '(not written)'}")
        if not self.options.live:
            self.out.say(SCRIPTED_NOTE, style="bold yellow")


RUN = ("tilth.cli.run", "tilth.agent.pipeline")


def _last_task(session: Session) -> str:
    try:
        tasks = session.tasks()
    except TilthError:
        return "T-001"
    return tasks[-1].id if tasks else "T-001"


def run_demo(out: Lines, options: DemoOptions) -> int:
    """Say who plays the model, then build the tour and run it."""
    if options.live:
        # A missing setting fails here, before anything is created.
        endpoint = load_settings().endpoint("worker")
        out.say(f"tilth demo --live: a real model ({endpoint.model}) plays every part.")
    else:
        out.say(SCRIPTED_NOTE, style="bold yellow")
    root = Path(tempfile.mkdtemp(prefix="tilth-demo-"))
    return Tour(out, options, root).run()
