"""Bad model output of any depth, and file names that are not UTF-8, never stop a run
(issue #24, findings 3 and 4)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from agent.support import TASKS, model_env, recipes, seed_session, team_server, tilth
from web.support import serve

from tilth.demo.script import Recipe, Team
from tilth.model.script import tool_call, tool_call_raw


def test_deeply_nested_tool_arguments_are_a_parse_error_not_a_crash(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    recipe = Recipe(dict(recipes()["T-001"].files), test_command="true")
    # Deep, but not one piece over and over (that the repetition guard cuts short first).
    recipe.probes = [tool_call_raw("write_file", "".join(f"[{n}," for n in range(50_000)))]
    with team_server(Team(recipes(T_001=recipe))) as server:
        # ~83,000 tokens of arguments: a reply limit that takes them whole (the fake server,
        # like llama.cpp, cuts a reply at max_tokens, and a cut call is a different answer).
        env = model_env(server.base_url, TILTH_MAX_REPLY_TOKENS="200000")
        ran = tilth("run", str(repo), env=env)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        shown = tilth("visualize", seeded.session.id, env=env)
        assert shown.returncode == 0, shown.stderr
        listed = tilth("checkpoints", seeded.session.id, env=env)
        assert listed.returncode == 0, listed.stderr
        bodies = [json.dumps(r["body"]) for r in server.requests if r["body"]]
    assert any("nested too deeply" in body for body in bodies)
    assert seeded.statuses() == {"T-001": "done"}


def test_a_file_name_that_is_not_utf8_survives_run_resume_and_rewind(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:2])
    recipe = Recipe(dict(recipes()["T-001"].files), test_command="true")
    recipe.probes = [tool_call("bash", command="printf x > $'bad\\xff.txt'")]
    stall = Recipe(dict(recipes()["T-002"].files), test_command="true", mode="stall")
    odd = os.fsencode(str(seeded.worktree)) + b"/bad\xff.txt"
    with team_server(Team(recipes(T_001=recipe, T_002=stall))) as server:
        env = model_env(server.base_url, TILTH_MAX_ITERATIONS_PER_TASK="5")
        ran = tilth("run", str(repo), env=env)
        assert ran.returncode == 3, ran.stdout + ran.stderr
        assert os.path.exists(odd)
        shown = tilth("visualize", seeded.session.id, env=env)
        assert shown.returncode == 0, shown.stderr
        listed = tilth("checkpoints", seeded.session.id, env=env)
        assert listed.returncode == 0, listed.stderr
    assert seeded.statuses() == {"T-001": "done", "T-002": "failed"}, ran.stdout + ran.stderr
    with serve() as served:  # the web API names the file exactly (as its JSON escape)
        for path in ("", "/checkpoints"):
            answer = served.api("GET", f"/api/sessions/{seeded.session.id}{path}")
            assert answer.status_code == 200, answer.text
        files = json.dumps(answer.json())
    assert "bad\\udcff.txt" in files, files[:2000]
    committed = subprocess.run(
        ["git", "-C", str(seeded.worktree), "ls-files", "-z"], capture_output=True, check=True
    ).stdout
    assert b"bad\xff.txt" in committed.split(b"\0"), committed
    os.unlink(odd)
    with team_server(Team(recipes())) as server:
        env = model_env(server.base_url)
        back = tilth("rewind", seeded.session.id, "--to", "T-002", "--force", "-y", env=env)
        assert back.returncode == 0, back.stdout + back.stderr
        assert os.path.exists(odd), back.stdout + back.stderr  # restored byte for byte
        resumed = tilth("resume", seeded.session.id, env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert seeded.statuses() == {"T-001": "done", "T-002": "done"}
