"""``tilth doctor`` has a sandbox row; ``run`` warns loudly (auto) or refuses (required)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from agent.support import TASKS, model_env, recipes, seed_session, team_server, tilth

from security.conftest import require_sandbox
from tilth.demo.script import Team


def _no_bwrap(tmp_path: Path) -> dict[str, str]:
    """PATH with a ``bwrap`` that cannot make a sandbox (as on a machine without userns)."""
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: setting up uid map: denied' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    return {"PATH": f"{fake}:{os.environ['PATH']}"}


def _row(stdout: str) -> dict[str, object]:
    checks = json.loads(stdout)["checks"]
    (row,) = [c for c in checks if c["name"] == "sandbox"]
    return dict(row)


def test_doctor_shows_the_sandbox(repo: Path, tilth_home: Path) -> None:
    require_sandbox()
    done = tilth("doctor", str(repo), "--json", env=model_env("http://127.0.0.1:9/v1"))
    row = _row(done.stdout)
    assert row["ok"] is True and "bubblewrap" in str(row["detail"])


def test_doctor_flags_a_missing_sandbox(repo: Path, tilth_home: Path, tmp_path: Path) -> None:
    env = {**model_env("http://127.0.0.1:9/v1"), **_no_bwrap(tmp_path)}
    auto = _row(tilth("doctor", str(repo), "--json", env=env).stdout)
    assert auto["ok"] is False and auto["required"] is False
    assert "WITHOUT a sandbox" in str(auto["detail"]) and "uid map" in str(auto["detail"])
    required = _row(
        tilth("doctor", str(repo), "--json", env={**env, "TILTH_SANDBOX": "required"}).stdout
    )
    assert required["ok"] is False and required["required"] is True


def test_run_warns_once_without_a_sandbox_and_refuses_when_required(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    with team_server(Team(recipes())) as server:
        env = {**model_env(server.base_url), **_no_bwrap(tmp_path)}
        refused = tilth("run", str(repo), env={**env, "TILTH_SANDBOX": "required"})
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "TILTH_SANDBOX=required but the sandbox is unavailable" in refused.stderr
        assert not server.requests, "refused before any model call"
        assert seeded.session.status == "prepared"
        ran = tilth("run", str(repo), env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stderr.count("WITHOUT a sandbox") == 1
    (event,) = [e.payload for e in seeded.events() if e.type == "sandbox"]
    assert event["sandboxed"] is False and event["mode"] == "auto"
