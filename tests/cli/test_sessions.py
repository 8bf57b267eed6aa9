"""``tilth --help``, ``--version`` and ``tilth sessions`` through the real CLI."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import tilth
from tilth.cli import VERBS
from tilth.git import worktrees as git_worktrees
from tilth.session.store import Session

RunCli = Callable[..., subprocess.CompletedProcess[str]]


def new_session(sessions_dir: Path, source: Path) -> Session:
    """A session as prep-feature starts one: record, start event, worktree, branch."""
    session = Session.create(sessions_dir, source)
    session.log("session_start", source=str(source), phase="prep-feature")
    worktree = git_worktrees.ensure_worktree(source, session.workspace_dir, session.branch)
    session.update_checkpoint(workspace=str(worktree), branch=session.branch)
    return session


def test_help_lists_every_available_verb(cli: RunCli) -> None:
    result = cli("--help")
    assert result.returncode == 0, result.stderr
    assert "Usage: tilth" in result.stdout
    listed = result.stdout.split("Commands:", 1)[1]
    available = [v for v, (module, _, _) in VERBS.items() if importlib.util.find_spec(module)]
    assert "sessions" in available and "reset" in available
    for verb in available:
        assert f"  {verb} " in listed, verb
    assert cli("-h").stdout == result.stdout


def test_version(cli: RunCli) -> None:
    result = cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"tilth, version {tilth.__version__}"


def test_verb_help(cli: RunCli) -> None:
    result = cli("sessions", "--help")
    assert result.returncode == 0
    assert "--json" in result.stdout


def test_no_sessions_yet(cli: RunCli, sessions_dir: Path) -> None:
    result = cli("sessions")
    assert result.returncode == 0, result.stderr
    assert f"no sessions under {sessions_dir}" in result.stdout
    as_json = cli("sessions", "--json")
    assert as_json.returncode == 0
    assert json.loads(as_json.stdout) == []


def build_sessions(sessions_dir: Path, repo: Path, other: Path) -> tuple[Session, Session]:
    first = new_session(sessions_dir, repo)
    first.save_prd(
        [
            {"id": "T-001", "title": "a", "status": "done"},
            {"id": "T-002", "title": "b", "status": "done"},
            {"id": "T-003", "title": "c", "status": "failed"},
        ]
    )
    first.log("stop", reason="wall_clock")
    first.log("session_resume", plan=[])
    first.log("stop", reason="iter_cap")
    first.set_status("failed")
    second = new_session(sessions_dir, other)
    second.set_status("prepared")
    return first, second


def other_repo(tmp_path: Path) -> Path:
    """A second real repository, with a long path (tables must not cut it)."""
    path = tmp_path / ("other-repo-with-a-rather-long-name-" * 3 + "end")
    if not path.exists():
        path.mkdir()
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, check=True)
        (path / "a.txt").write_text("a\n")
        subprocess.run(["git", "add", "-A"], cwd=path, check=True)
        subprocess.run(["git", "commit", "-q", "-m", "initial"], cwd=path, check=True)
    return path.resolve()


def test_table_lists_id_source_status_tasks_and_last_stop(
    cli: RunCli, sessions_dir: Path, repo: Path, tmp_path: Path
) -> None:
    first, second = build_sessions(sessions_dir, repo, other_repo(tmp_path))
    result = cli("sessions")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["id", "kind", "status", "tasks", "last", "stop", "source"]
    row1 = next(line for line in lines if line.startswith(first.id))
    row2 = next(line for line in lines if line.startswith(second.id))
    assert row1.split() == [first.id, "run", "failed", "2/3", "iter_cap", str(repo)]
    assert row2.split() == [second.id, "run", "prepared", "-", "-", str(other_repo(tmp_path))]
    assert lines.index(row1) < lines.index(row2)  # oldest first
    # Piped output is for scripts: cells are not padded out with trailing blanks.
    assert all(line == line.rstrip() for line in lines), lines


def test_json_lists_the_same_facts(
    cli: RunCli, sessions_dir: Path, repo: Path, tmp_path: Path
) -> None:
    other = other_repo(tmp_path)
    first, second = build_sessions(sessions_dir, repo, other)
    result = cli("sessions", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [r["id"] for r in rows] == [first.id, second.id]
    assert {
        k: rows[0][k] for k in ("source", "status", "tasks_done", "tasks_total", "last_stop")
    } == {
        "source": str(repo),
        "status": "failed",
        "tasks_done": 2,
        "tasks_total": 3,
        "last_stop": "iter_cap",
    }
    assert rows[1]["status"] == "prepared" and rows[1]["source"] == str(other)
    assert rows[1]["tasks_total"] == 0 and rows[1]["last_stop"] is None
    assert rows[0]["kind"] == rows[1]["kind"] == "run"


def test_workspace_filter(cli: RunCli, sessions_dir: Path, repo: Path, tmp_path: Path) -> None:
    first, _ = build_sessions(sessions_dir, repo, other_repo(tmp_path))
    result = cli("sessions", "--json", "--workspace", str(repo / "src" / ".."))
    assert [r["id"] for r in json.loads(result.stdout)] == [first.id]
    elsewhere = tmp_path / "elsewhere"
    none_here = cli("sessions", "--workspace", str(elsewhere))
    assert none_here.returncode == 0, none_here.stderr
    assert f"no sessions of {elsewhere.resolve()} under {sessions_dir}" in none_here.stdout


def test_a_damaged_session_does_not_break_the_listing(
    cli: RunCli, sessions_dir: Path, repo: Path
) -> None:
    good = new_session(sessions_dir, repo)
    bad = new_session(sessions_dir, repo)
    bad.checkpoint_path.write_text("{ not json")
    bad.prd_path.write_text("also not json")
    result = cli("sessions")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    bad_row = next(line for line in result.stdout.splitlines() if line.startswith(bad.id))
    assert "damaged: " in bad_row and "checkpoint.json" in bad_row
    assert any(line.startswith(good.id) for line in result.stdout.splitlines())
    rows = {r["id"]: r for r in json.loads(cli("sessions", "--json").stdout)}
    assert rows[bad.id]["status"] == "unreadable" and rows[bad.id]["problem"]


def test_latest_session_announcement_keeps_stdout_clean(sessions_dir: Path, repo: Path) -> None:
    import io

    from tilth.cli.common import pick_session
    from tilth.config import load_settings
    from tilth.ui.io import IO

    session = Session.create(sessions_dir, repo)
    cfg = load_settings()
    streams = {"stdout": io.StringIO(), "stderr": io.StringIO()}
    out = IO(stdin=io.StringIO(), stdout=streams["stdout"], stderr=streams["stderr"])
    assert pick_session(cfg, None, out, "checkpoints") == session
    assert f"checkpoints: latest session is {session.id}" in streams["stderr"].getvalue()
    assert streams["stdout"].getvalue() == ""


def test_a_mistyped_verb_suggests_the_close_one(cli: RunCli) -> None:
    result = cli("rwind")
    assert result.returncode == 2
    assert "No such command 'rwind'. Did you mean 'rewind'?" in result.stderr
    unknown = cli("zzz")
    assert unknown.returncode == 2
    assert "No such command 'zzz'." in unknown.stderr and "Did you mean" not in unknown.stderr


def test_checkpoints_gc_with_a_session_id_says_it_covers_every_session(
    cli: RunCli, sessions_dir: Path
) -> None:
    result = cli("checkpoints", "20260101-000000-abcdef", "--gc")
    assert result.returncode == 0, result.stderr
    assert "every session, not only 20260101-000000-abcdef" in result.stderr
    assert "pruned" in result.stdout
