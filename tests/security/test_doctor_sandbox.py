"""``tilth doctor`` has a sandbox row; ``run`` warns loudly (auto) or refuses (required).

"No sandbox at all" is a machine whose bubblewrap cannot start and whose kernel refuses
Landlock's calls (``no_landlock.py``, a seccomp filter): Tilth then runs in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from agent.support import TASKS, model_env, recipes, seed_session, team_server, tilth

from security.conftest import backend_env, require_backend
from tilth.demo.script import Team

NO_LANDLOCK = Path(__file__).with_name("no_landlock.py")


def _tilth_without_landlock(*args: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env}
    full.pop("TILTH_DEBUG", None)
    argv = [sys.executable, str(NO_LANDLOCK), sys.executable, "-m", "tilth", *args]
    return subprocess.run(
        argv, env=full, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


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
    require_backend("bwrap")
    done = tilth("doctor", str(repo), "--json", env=model_env("http://127.0.0.1:9/v1"))
    row = _row(done.stdout)
    assert row["ok"] is True and "bubblewrap" in str(row["detail"])


def test_doctor_names_landlock_when_bubblewrap_is_hidden(
    repo: Path, tilth_home: Path, tmp_path: Path
) -> None:
    require_backend("landlock")
    env = {**model_env("http://127.0.0.1:9/v1"), **backend_env("landlock", tmp_path / "bin")}
    row = _row(tilth("doctor", str(repo), "--json", env=env).stdout)
    assert row["ok"] is True, row
    detail = str(row["detail"])
    assert detail.startswith("Landlock ABI ") and "[TILTH_SANDBOX=auto]" in detail
    assert "capabilities dropped" in detail and "files" in detail
    # ...and with bubblewrap there but unable to start, the same.
    broken = {**model_env("http://127.0.0.1:9/v1"), **_no_bwrap(tmp_path)}
    assert str(_row(tilth("doctor", str(repo), "--json", env=broken).stdout)["detail"]).startswith(
        "Landlock ABI "
    )
    named = _row(
        tilth("doctor", str(repo), "--json", env={**broken, "TILTH_SANDBOX": "bwrap"}).stdout
    )
    assert named["ok"] is False and named["required"] is True and "uid map" in str(named["detail"])


def test_doctor_flags_a_missing_sandbox(repo: Path, tilth_home: Path, tmp_path: Path) -> None:
    env = {**model_env("http://127.0.0.1:9/v1"), **_no_bwrap(tmp_path)}
    auto = _row(_tilth_without_landlock("doctor", str(repo), "--json", env=env).stdout)
    assert auto["ok"] is False and auto["required"] is False
    assert "WITHOUT a sandbox" in str(auto["detail"]) and "uid map" in str(auto["detail"])
    assert "Landlock is not available" in str(auto["detail"])
    required = _row(
        _tilth_without_landlock(
            "doctor", str(repo), "--json", env={**env, "TILTH_SANDBOX": "required"}
        ).stdout
    )
    assert required["ok"] is False and required["required"] is True


def test_run_warns_once_without_a_sandbox_and_refuses_when_required(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    with team_server(Team(recipes())) as server:
        env = {**model_env(server.base_url), **_no_bwrap(tmp_path)}
        refused = _tilth_without_landlock(
            "run", str(repo), env={**env, "TILTH_SANDBOX": "required"}
        )
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "TILTH_SANDBOX=required but the sandbox is unavailable" in refused.stderr
        assert not server.requests, "refused before any model call"
        assert seeded.session.status == "prepared"
        ran = _tilth_without_landlock("run", str(repo), env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stderr.count("WITHOUT a sandbox") == 1
    (event,) = [e.payload for e in seeded.events() if e.type == "sandbox"]
    assert event["sandboxed"] is False and event["mode"] == "auto"
