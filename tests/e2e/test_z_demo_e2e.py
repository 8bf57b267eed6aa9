"""SPEC §9 from outside: ``tilth demo`` tells the whole story offline, labelled as scripted.

Named to sort last: the demo was started (in its own network namespace when
possible) when the suite's lab was built, and ran beside the other tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.demo_runner import DEMO, start_demo
from tests.e2e.lab import Lab
from tests.sessionview import SessionView
from tilth import git


@pytest.mark.timeout(420)  # a minute on a quiet machine; several under a loaded CI
def test_demo_runs_end_to_end_offline_and_says_it_is_scripted(lab: Lab, tmp_path: Path) -> None:
    process = DEMO.pop("process", None) or start_demo(tmp_path)
    out, err = process.communicate(timeout=400)
    assert process.returncode == 0, out[-3000:] + err[-3000:]
    assert "Traceback" not in out + err
    lines = [line for line in out.splitlines() if line.strip()]
    assert "scripted" in lines[0].lower()
    assert "no network" in out.lower()
    for verb in ("prep-feature", "run", "reset", "rewind", "restart", "visualize"):
        assert f"tilth {verb}" in out, verb
    sessions = Path(DEMO["home"]) / "sessions"
    session = SessionView.only(sessions)
    sdir = session.dir
    assert session.status == "all_done"
    verdicts = session.payloads("evaluator_verdict")
    assert "reject" in [v["verdict"] for v in verdicts if v.get("stage") == "code_review"]
    t001 = [v["verdict"] for v in verdicts if v.get("task_id") == "T-001"]
    assert t001 == ["reject", "accept"]  # reset --to-seed cut the log: this is the second run
    worktree = sdir / "workspace"
    subjects = git.git("log", "--format=%s", cwd=worktree).splitlines()
    assert subjects[0] == "task/T-002: complete verifying stage"
    assert not any("FAILED" in s for s in subjects)
    summary = json.loads((sdir / "summary.json").read_text())
    assert summary["stop"]["reason"] == "all_done"
    assert str(sdir / "chat.html") in out
    assert "scripted" in (sdir / "chat.html").read_text().lower()
