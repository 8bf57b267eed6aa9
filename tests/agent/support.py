"""Shared set-up for run/resume tests: a seeded session and the real CLI on a fake server.

The seed is written directly with the Session API (worktree, branch, seed commit,
prd.json, events), so these tests do not depend on prep-feature.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.sessionview import SessionView
from tilth import git
from tilth.demo.script import EVALUATOR, WORKER, Recipe, Team
from tilth.git import worktrees as git_worktrees
from tilth.model import FakeServer, Script
from tilth.session.files import atomic_write_json
from tilth.session.store import Session

API_KEY = "sk-marker-7f3e1c9a2b-never-leak"

PACKAGE = {"README.md": "# textkit\n", "textkit/__init__.py": ""}

TASKS: list[dict[str, Any]] = [
    {
        "id": "T-001",
        "title": "Count words",
        "description": "Add textkit.words.count_words(text) returning the number of words.",
        "acceptance_criteria": ["count_words('a b') == 2", "count_words('') == 0"],
    },
    {
        "id": "T-002",
        "title": "Shout",
        "description": "Add textkit.shout.shout(text) returning text upper-cased with '!'.",
        "acceptance_criteria": ["shout('hi') == 'HI!'"],
    },
    {
        "id": "T-003",
        "title": "Squash spaces",
        "description": "Add textkit.squash.squash(text) collapsing runs of spaces.",
        "acceptance_criteria": ["squash('a   b') == 'a b'"],
    },
]

TESTS = {
    "T-001": (
        "tests/test_t001_count_words.py",
        "from textkit.words import count_words\n\n\n"
        "def test_counts():\n    assert count_words('a b') == 2\n    assert count_words('') == 0\n",
    ),
    "T-002": (
        "tests/test_t002_shout.py",
        "from textkit.shout import shout\n\n\ndef test_shout():\n    assert shout('hi') == 'HI!'\n",
    ),
    "T-003": (
        "tests/test_t003_squash.py",
        "from textkit.squash import squash\n\n\n"
        "def test_squash():\n    assert squash('a   b') == 'a b'\n",
    ),
}

GOOD = {
    "T-001": {"textkit/words.py": "def count_words(text):\n    return len(text.split())\n"},
    "T-002": {"textkit/shout.py": "def shout(text):\n    return text.upper() + '!'\n"},
    "T-003": {"textkit/squash.py": "def squash(text):\n    return ' '.join(text.split())\n"},
}


def recipes(**overrides: Recipe) -> dict[str, Recipe]:
    """A working recipe per task, with ``T_001=Recipe(...)``-style overrides."""
    # The harness runs the seed tests itself; the worker's own test run is a cheap stand-in.
    base = {tid: Recipe(files=dict(files), test_command="true") for tid, files in GOOD.items()}
    for key, recipe in overrides.items():
        base[key.replace("_", "-")] = recipe
    return base


@dataclass
class Seeded(SessionView):
    """A prepared session ready for ``tilth run`` (read it through ``SessionView``)."""

    session: Session
    source: Path
    worktree: Path
    seed_sha: str

    def subjects(self) -> list[str]:
        out = git.git("log", "--format=%s", f"{self.seed_sha}..HEAD", cwd=self.worktree)
        return list(reversed(out.splitlines()))


def seed_session(sessions_dir: Path, source: Path, tasks: list[dict[str, Any]] = TASKS) -> Seeded:
    """A ``prepared`` session of ``source`` with ``tasks`` and their seed tests committed."""
    session = Session.create(sessions_dir, source)
    session.log("session_start", source=str(source), phase="prep-feature")
    worktree = git_worktrees.ensure_worktree(source, session.workspace_dir, session.branch)
    for task in tasks:
        name, body = TESTS[task["id"]]
        (worktree / name).parent.mkdir(parents=True, exist_ok=True)
        (worktree / name).write_text(body)
    sha = git.commit_all(worktree, f"seed: {len(tasks)} task(s) + {len(tasks)} acceptance test(s)")
    assert sha is not None
    session.save_prd([{**task, "status": "pending"} for task in tasks])
    atomic_write_json(session.seed_meta_path, {"tldr": "textkit helpers", "tokens": {"total": 0}})
    session.log("session_prepared", tokens_used=0, prd_entries=len(tasks))
    session.log("seed_committed", sha=sha, branch=session.branch)
    session.update_checkpoint(workspace=str(worktree), branch=session.branch, status="prepared")
    return Seeded(session, source, worktree, sha)


def model_env(base_url: str, **settings: str) -> dict[str, str]:
    """TILTH_* for a run against ``base_url`` with fast back-offs."""
    env = {
        "TILTH_BASE_URL": base_url,
        "TILTH_API_KEY": API_KEY,
        "TILTH_WORKER_MODEL": WORKER,
        "TILTH_EVALUATOR_MODEL": EVALUATOR,
        "TILTH_MODEL_BACKOFF_SECONDS": "0.001",
        "TILTH_EMPTY_BACKOFF_SECONDS": "0",
        "TILTH_MODEL_MAX_RETRIES": "0",
        # The seed tests need no plugins; loading the venv's (hypothesis...) costs seconds a run.
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    env.update(settings)
    return env


@contextmanager
def team_server(team: Team | Any, *, honour_max_tokens: bool = True) -> Iterator[FakeServer]:
    """A loopback fake server answering from ``team`` (a ``Team`` or a script function)."""
    server = FakeServer(Script(team), honour_max_tokens=honour_max_tokens).start()
    try:
        yield server
    finally:
        server.stop()
    # The secret filter (SPEC §5.5): no request a model received carries the API key.
    leaked = [r["path"] for r in server.requests if r["body"] and API_KEY in json.dumps(r["body"])]
    assert leaked == [], f"the API key reached the model in {len(leaked)} request(s)"


def tilth(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    """The real CLI (stdin not a TTY), in this process: the loop is the same code either
    way; signals and exit codes of a real process are tested with ``subprocess`` directly."""
    from tests.conftest import run_cli_in_process

    return run_cli_in_process(*args, env=env)


def worker_requests(server: FakeServer) -> list[dict[str, Any]]:
    return [r["body"] for r in server.requests if r["body"] and r["body"].get("model") == WORKER]


def evaluator_requests(server: FakeServer) -> list[dict[str, Any]]:
    bodies = [r["body"] for r in server.requests if r["body"]]
    return [b for b in bodies if b.get("model") == EVALUATOR]


def request_text(body: dict[str, Any]) -> str:
    return json.dumps(body.get("messages"))
