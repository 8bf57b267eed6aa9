"""A run whose worker tries to leave the worktree through every tool, and hunts for the API key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.support import API_KEY, GOOD, TASKS, model_env, recipes, seed_session, team_server, tilth
from tilth.demo.script import Recipe, Team


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


ESCAPES = [
    _call("read_file", path="../checkpoint.json"),
    _call("read_file", path="/etc/passwd"),
    _call("write_file", path="../escaped.txt", content="out"),
    _call("edit_file", path="../prd.json", old_string="T-001", new_string="T-999"),
    _call("glob", pattern="../*"),
    _call("grep", pattern="session_id", path_glob="../*"),
    _call("bash", command="ln -s .. up"),
    _call("read_file", path="up/checkpoint.json"),
    _call("write_file", path="up/escaped.txt", content="out"),
]
ENV_PROBE = _call("bash", command="env")


def test_escapes_fail_and_the_api_key_is_nowhere(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    recipe = Recipe(GOOD["T-001"], probes=[*ESCAPES, ENV_PROBE], test_command="true")
    session_dir = seeded.session.dir
    prd_before = seeded.session.prd_path.read_text()
    with team_server(Team(recipes(T_001=recipe))) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url))
    assert result.returncode == 0, result.stdout + result.stderr

    results = [e.payload for e in seeded.events() if e.type == "tool_result"]
    by_call = {r["call_id"]: r for r in results}
    calls = [e.payload for e in seeded.events() if e.type == "tool_call"]
    probes = [c for c in calls if c["tool"] != "submit_plan"][1 : 1 + len(ESCAPES) + 1]
    escape_results = [by_call[c["call_id"]] for c in probes[: len(ESCAPES)]]
    for probe, outcome in zip(ESCAPES, escape_results, strict=True):
        if probe["arguments"].get("command") == "ln -s .. up":
            continue  # making the link is allowed; following it is not
        assert outcome["is_error"] or outcome["blocked"], (probe, outcome)
        assert '"session_id"' not in outcome["result_preview"], (probe, outcome)
    assert not (session_dir / "escaped.txt").exists()
    assert not (session_dir.parent / "escaped.txt").exists()
    assert seeded.session.prd_path.read_text().count("T-999") == 0
    assert "T-001" in prd_before

    env_result = by_call[probes[len(ESCAPES)]["call_id"]]
    assert not env_result["is_error"]
    # The whole env listing reached the worker's thread (so the key check below means something).
    threads = "".join(p.read_text() for p in (session_dir / "threads").glob("*.jsonl"))
    assert "PATH=" in threads
    leaks = [
        path
        for path in session_dir.rglob("*")
        if path.is_file() and API_KEY.encode() in path.read_bytes()
    ]
    assert leaks == []
    assert API_KEY not in result.stdout + result.stderr
