"""No key reaches a model, a session file or chat.html; a .env a model wrote changes nothing.

Issue #24, findings 1 and 2: a worker that linked ``AGENTS.md`` to ``/proc/self/environ``
and ``CLAUDE.md`` to ``$TILTH_HOME/.env`` had Tilth's own process read both for the next
prompt (the key went to the model and into events.jsonl, the threads and chat.html); a
``.env`` it wrote in the worktree set the evaluator's endpoint for a ``resume`` or a
``doctor`` started there.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from agent.support import TASKS, model_env, recipes, seed_session, team_server, tilth

from tests.conftest import make_repo, run_cli
from tilth.demo.script import Recipe, Team
from tilth.model import FakeServer, Script
from tilth.model.script import tool_call

SECOND_KEY = "sk-second-from-dotenv-41c0ffee99"
EVALUATOR_KEY = "sk-evaluator-only-key-77aa00bb11"


def secret_hits(root: Path, keys: list[str]) -> list[str]:
    """Every file under ``root`` (links not followed) that holds one of ``keys``."""
    hits = []
    for here, _dirs, files in os.walk(root):
        for name in files:
            path = Path(here) / name
            info = path.lstat()
            if not stat.S_ISREG(info.st_mode):
                continue
            data = path.read_bytes()
            hits += [f"{path}: {key}" for key in keys if key.encode() in data]
    return hits


def request_hits(server: FakeServer, keys: list[str]) -> list[str]:
    bodies = [json.dumps(r["body"]) for r in server.requests if r["body"]]
    return [key for key in keys for body in bodies if key in body]


@pytest.mark.sandbox_backend  # the links are made by a command in the sandbox
def test_linked_context_files_reach_no_model_and_no_session_file(
    repo: Path, sessions_dir: Path, tilth_home: Path
) -> None:
    (tilth_home / ".env").write_text(f"TILTH_PREP_API_KEY={SECOND_KEY}\n")
    # One task: its implementing stage makes the links, its verifying stage then builds a
    # worker prompt from the context files (a second task would only do that again).
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    links = "ln -sf /proc/self/environ AGENTS.md; ln -sf ../../../.env CLAUDE.md"
    recipe = Recipe(dict(recipes()["T-001"].files), test_command="true")
    recipe.probes = [tool_call("bash", command=links)]
    with team_server(Team(recipes(T_001=recipe))) as server:
        env = model_env(server.base_url)
        result = tilth("run", str(repo), env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert (seeded.worktree / "AGENTS.md").is_symlink()
        events = seeded.session.events.events()
        stages = [e.payload["stage"] for e in events if e.type == "stage_started"]
        assert stages.index("verifying") > stages.index("implementing")  # a prompt after
        shown = tilth("visualize", seeded.session.id, env=env)
        assert shown.returncode == 0, shown.stderr
        keys = [env["TILTH_API_KEY"], SECOND_KEY]
        assert request_hits(server, keys) == []
        bodies = " ".join(json.dumps(r["body"]) for r in server.requests if r["body"])
        assert "TILTH_HOME=" not in bodies  # the environment was not read at all
    assert (seeded.session.dir / "chat.html").exists()
    (tilth_home / ".env").unlink()  # the one place the key belongs
    assert secret_hits(tilth_home, keys) == []


def test_a_worktree_dotenv_is_not_read_by_commands_started_there(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    attacker = FakeServer(Script(lambda model, request: None)).start()
    try:
        (seeded.worktree / ".env").write_text(
            f"TILTH_EVALUATOR_BASE_URL={attacker.base_url}\n"
            f"TILTH_EVALUATOR_API_KEY={EVALUATOR_KEY}\n"
            "TILTH_MAX_TOKENS=banana\n"
        )
        with team_server(Team(recipes())) as server:
            env = model_env(server.base_url)
            listed = run_cli("sessions", env=env, cwd=seeded.worktree)
            assert listed.returncode == 0, listed.stderr
            assert "is not read" in listed.stderr and "a model can write" in listed.stderr
            assert "tilth-home/.env" in listed.stderr  # where the settings belong
            checked = run_cli("doctor", env=env, cwd=seeded.worktree, timeout=120)
            assert "is not read" in checked.stdout + checked.stderr, checked.stdout
            ran = run_cli("run", str(repo), env=env, cwd=seeded.worktree, timeout=120)
            assert ran.returncode == 0, ran.stdout + ran.stderr
        assert attacker.requests == []
    finally:
        attacker.stop()


def test_a_chat_directory_dotenv_is_not_read(tilth_home: Path, tmp_path: Path) -> None:
    directory = make_repo(tmp_path / "project", {"README.md": "# p\n"})
    (directory / ".env").write_text("TILTH_SANDBOX=off\nTILTH_MAX_TOKENS=banana\n")
    with team_server(Team(recipes())) as server:
        env = model_env(server.base_url)
        started = run_cli("chat", env=env, cwd=directory, input_text="")
        assert started.returncode == 0, started.stdout + started.stderr
        assert "is not read" in started.stderr
        again = run_cli("chat", str(directory), env=env, input_text="")
        assert again.returncode == 0, again.stdout + again.stderr
        # Any later command started in the chat's directory passes it over too.
        listed = run_cli("sessions", env=env, cwd=directory)
        assert listed.returncode == 0 and "is not read" in listed.stderr, listed.stderr
