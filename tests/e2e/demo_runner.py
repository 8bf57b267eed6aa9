"""``tilth demo`` run with no network, and what its story must show (SPEC §9).

The suite runs the demo once, from the plain ``pip install`` (test_plain_install_e2e.py): the
installed program with no pytest in its environment, offline, telling the whole story.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from tests.sessionview import SessionView
from tilth import git

# a dead proxy: if anything tried to reach the network despite the namespace, it would fail
_NO_PROXY_ENV = {
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "ALL_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost",
}


def _isolating_prefix() -> list[str]:
    """``unshare -n`` (own network namespace, loopback only) when we may use it."""
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if unshare is None or ip is None or os.geteuid() != 0:
        return []
    probe = subprocess.run([unshare, "-n", ip, "link", "set", "lo", "up"], capture_output=True)
    if probe.returncode != 0:
        return []
    return [unshare, "-n", "sh", "-c", f'{ip} link set lo up && exec "$@"', "sh"]


def run_demo(tilth: Path, workdir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``tilth demo --home <workdir>/home`` in its own network namespace when possible."""
    env = {**env, **_NO_PROXY_ENV, "TMPDIR": str(workdir)}
    return subprocess.run(
        [*_isolating_prefix(), str(tilth), "demo", "--home", str(workdir / "home")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=workdir,
        timeout=400,
    )


def check_demo_story(done: subprocess.CompletedProcess[str], home: Path) -> None:
    """The demo finished offline, said it is scripted, and left the story's session behind."""
    out, err = done.stdout, done.stderr
    assert done.returncode == 0, out[-3000:] + err[-3000:]
    assert "Traceback" not in out + err
    lines = [line for line in out.splitlines() if line.strip()]
    assert "scripted" in lines[0].lower()
    assert "no network" in out.lower()
    assert "── demo finished ──" in out
    for verb in ("prep-feature", "run", "reset", "rewind", "restart", "visualize"):
        assert f"tilth {verb}" in out, verb
    session = SessionView.only(home / "sessions")
    sdir = session.dir
    assert session.status == "all_done"
    verdicts = session.payloads("evaluator_verdict")
    assert "reject" in [v["verdict"] for v in verdicts if v.get("stage") == "code_review"]
    t001 = [v["verdict"] for v in verdicts if v.get("task_id") == "T-001"]
    assert t001 == ["reject", "accept"]  # reset --to-seed cut the log: this is the second run
    subjects = git.git("log", "--format=%s", cwd=sdir / "workspace").splitlines()
    assert subjects[0] == "task/T-002: complete verifying stage"
    assert not any("FAILED" in s for s in subjects)
    summary = json.loads((sdir / "summary.json").read_text())
    assert summary["stop"]["reason"] == "all_done"
    assert str(sdir / "chat.html") in out
    assert "scripted" in (sdir / "chat.html").read_text().lower()
