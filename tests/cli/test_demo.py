"""``tilth demo`` end to end: every step runs, the story happens, the model is labelled scripted."""

from __future__ import annotations

import json
from pathlib import Path

from agent.support import tilth

from tilth import git
from tilth.session.discovery import session_ids
from tilth.session.store import Session


def test_the_scripted_demo_tells_the_whole_story(tmp_path: Path, tilth_home: Path) -> None:
    home = tmp_path / "demo-home"
    result = tilth("demo", "--home", str(home), env={"TMPDIR": str(tmp_path)}, timeout=300)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in out.splitlines() if line.strip()]
    assert "SCRIPTED" in lines[0] and "SCRIPTED" in lines[-1]
    assert "skipped" not in out
    for verb in ("prep-feature", "run", "reset", "rewind", "resume", "restart", "visualize"):
        assert f"$ tilth {verb} " in out, verb

    (sid,) = session_ids(home / "sessions")
    session = Session(sid, home / "sessions" / sid)
    assert session.status == "all_done"
    assert [t["status"] for t in session.load_prd()] == ["done", "done"]
    events = session.events.events()
    # reset --to-seed cut the log, so this is the second run's story (plus rewind/restart).
    verdicts = [
        e.payload["verdict"]
        for e in events
        if e.type == "evaluator_verdict" and e.payload.get("task_id") == "T-001"
    ]
    assert verdicts == ["reject", "accept"]
    worktree = session.workspace_dir
    subjects = git.git("log", "--format=%s", cwd=worktree).splitlines()
    assert subjects[0] == "task/T-002: complete verifying stage"
    assert not any("FAILED" in s for s in subjects)
    assert '"""Count whitespace-separated words' in (worktree / "textutils/count.py").read_text()
    chat = session.chat_html_path.read_text()
    assert "scripted" in chat.lower()
    assert str(session.chat_html_path) in out
    summary = json.loads(session.summary_path.read_text())
    assert summary["stop"]["reason"] == "all_done"


def test_live_demo_without_an_endpoint_is_a_clean_usage_error(
    tmp_path: Path, tilth_home: Path
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = tilth("demo", "--live", env={"TMPDIR": str(scratch)})
    assert result.returncode == 2
    assert "TILTH_BASE_URL" in result.stderr and "Traceback" not in result.stderr
    assert list(scratch.iterdir()) == []  # nothing was created
