"""``tilth prep-feature`` through the real CLI against a loopback fake model server."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from seed.support import (
    API_KEY,
    MODEL,
    cli_env,
    quick_script,
    seed_args,
    session_dirs,
    tool_messages,
    write_seed,
)

from tests.sessionview import SessionView
from tilth import git
from tilth.model import FakeServer, Script, reply, tool_call

RunCli = Callable[..., subprocess.CompletedProcess[str]]

EXPECTED_TOOLS = ["read_file", "glob", "grep", "ask_user", "write_seed"]


def only_session(sessions_dir: Path) -> Path:
    found = session_dirs(sessions_dir)
    assert len(found) == 1, found
    return found[0]


def test_full_interview_writes_commits_and_records_the_seed(
    cli: RunCli, sessions_dir: Path, repo: Path
) -> None:
    script = Script(
        [
            reply("Looking at the code first.", tool_call("read_file", path="src/app.py")),
            reply(None, tool_call("ask_user", question="Which format?", options=["CSV", "JSON"])),
            reply(None, tool_call("ask_user", question="Anything to leave out?")),
            write_seed(2),
        ]
    )
    with FakeServer(script) as server:
        result = cli(
            "prep-feature",
            str(repo),
            "--brief",
            "add an exporter",
            input_text="2\nleave out the UI\n",
            env=cli_env(server),
        )
        requests = server.requests
    assert result.returncode == 0, result.stderr
    session_dir = only_session(sessions_dir)
    sid = session_dir.name
    worktree = session_dir / "workspace"
    assert "? Which format?" in result.stdout and "  1) CSV" in result.stdout
    assert "0) Other" in result.stdout
    assert "── seed written ──" in result.stdout and "should feature 1 log?" in result.stdout
    assert f"tilth run {repo}" in result.stdout
    # Piped, a slow model is never silent: a line before the first reply, one after each.
    waiting = result.stdout.index("waiting for the prep model")
    strips = [n for n, line in enumerate(result.stdout.splitlines()) if "[interview · " in line]
    assert waiting < result.stdout.index("[interview · prompt ")
    assert len(strips) == len([r for r in requests if r["path"].endswith("/completions")])

    # The model saw exactly the five interview tools, the brief, and each answer.
    bodies = [r["body"] for r in requests]
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == EXPECTED_TOOLS
    assert bodies[0]["model"] == MODEL
    assert bodies[0]["messages"][0]["role"] == "system"
    assert "add an exporter" in bodies[0]["messages"][1]["content"]
    assert "def hello()" in tool_messages(requests[1])[-1]
    assert tool_messages(requests[2])[-1] == "JSON"
    assert tool_messages(requests[3])[-1] == "leave out the UI"

    # prd.json: normalised entries, status pending.
    prd = SessionView.at(session_dir).prd()
    assert prd == [
        {
            "id": f"T-00{n}",
            "title": f"Add feature {n}",
            "description": f"Implement feature {n} in src/app.py.",
            "acceptance_criteria": [f"feature {n} returns 'ok'"],
            "status": "pending",
        }
        for n in (1, 2)
    ]
    meta = json.loads((session_dir / "seed-meta.json").read_text())
    assert meta["interviewer_model"] == MODEL
    assert meta["tokens"] == {"prompt": 40, "completion": 20, "total": 60}
    assert meta["tldr"].startswith("- **T-001:**")
    assert meta["open_questions"] == ["should feature 1 log?"]
    assert meta["blockers"] == [] and meta["scope_notes"] == "No UI changes."
    assert meta["started_at"] <= meta["ended_at"]

    # Tests live in the worktree, committed as the seed commit; the source is untouched.
    names = ["tests/test_t001_feature_1.py", "tests/test_t002_feature_2.py"]
    for name in names:
        assert (worktree / name).read_text() == seed_args(2)["test_files"][name[6:]]
        assert not (repo / name).exists()
    assert git.git("status", "--porcelain", cwd=repo) == ""
    assert git.git("rev-parse", "--abbrev-ref", "HEAD", cwd=repo).strip() == "main"
    assert git.subject("HEAD", worktree) == "seed: 2 task(s) + 2 acceptance test(s)"
    committed = git.git("show", "--name-only", "--format=", "HEAD", cwd=worktree).split()
    assert sorted(committed) == names
    assert git.git("status", "--porcelain", cwd=worktree) == ""
    sha = git.head(worktree)
    assert git.rev_parse(f"session/{sid}", repo) == sha

    # Events in order, the closing pair last, status prepared.
    view = SessionView.at(session_dir)
    types = view.types()
    turn = ["model_call", "tool_call", "tool_result"]
    assert types == ["session_start", *turn * 4, "session_prepared", "seed_committed"]
    assert [e["tool"] for e in view.payloads("tool_result")] == [
        "read_file",
        "ask_user",
        "ask_user",
        "write_seed",
    ]
    start = view.payloads("session_start")[0]
    assert start == {
        "source": str(repo),
        "phase": "prep-feature",
        "worktree": str(worktree.resolve()),
        "branch": f"session/{sid}",
    }
    prepared = view.payloads("session_prepared")[0]
    assert prepared["tokens_used"] == 60 and prepared["interviewer_model"] == MODEL
    assert prepared["prd_entries"] == 2 and prepared["test_files"] == 2
    assert view.payloads("seed_committed")[0] == {
        "sha": sha,
        "branch": f"session/{sid}",
    }
    calls = view.payloads("model_call")
    assert {c["actor"] for c in calls} == {"interviewer"} and all(c["scripted"] for c in calls)
    cp = view.record().to_dict()
    assert cp["status"] == "prepared"
    assert cp["workspace"] == str(worktree.resolve()) and cp["branch"] == f"session/{sid}"
    assert "stop" not in types

    # The seed checkpoint marks the instant the seed was committed.
    from tilth.session.store import Session
    from tilth.timeline import list_checkpoints

    (seed,) = list_checkpoints(Session(sid, session_dir))
    assert seed.kind == "seed" and seed.head == sha

    # The API key is written nowhere in the session.
    for path in session_dir.rglob("*"):
        if path.is_file() and ".git" not in path.parts:
            assert API_KEY not in path.read_text(errors="replace"), path


def test_seed_rules_are_enforced_and_the_model_retries(
    cli: RunCli, sessions_dir: Path, tmp_path: Path
) -> None:
    from conftest import make_repo

    repo = make_repo(tmp_path / "proj", {"tests/test_t001_taken.py": "def test_old(): pass\n"})
    good = seed_args(1)
    broken = {"test_t009_never.py": "def test_x(): pass\n"}  # must never be written
    cases: list[tuple[dict[str, object], str]] = [
        ({"prd_entries": []}, "prd_entries must be a non-empty list"),
        ({"prd_entries": [{"id": "T-001", "title": "x"}]}, "missing required key(s)"),
        ({"prd_entries": [{**good["prd_entries"][0], "id": "T-1"}]}, "T-NNN with 3+ digits"),
        ({"prd_entries": good["prd_entries"] * 2}, "duplicate task id T-001"),
        (
            {"prd_entries": [{**good["prd_entries"][0], "acceptance_criteria": []}]},
            "acceptance_criteria must be a non-empty list",
        ),
        ({"test_files": {"tests_t001.py": "x = 1\n"}}, "does not match test_t<NNN>_<slug>.py"),
        (
            {"test_files": {**good["test_files"], "test_t002_orphan.py": "x = 1\n"}},
            "test_t002_orphan.py does not belong to any task",
        ),
        (
            {
                "prd_entries": [*good["prd_entries"], {**good["prd_entries"][0], "id": "T-002"}],
                "test_files": {**good["test_files"], **broken},
            },
            "test_t009_never.py does not belong",
        ),
        (
            {"prd_entries": [*good["prd_entries"], {**good["prd_entries"][0], "id": "T-002"}]},
            "no test file for task(s) T-002",
        ),
        (
            {"test_files": {"test_t001_bad.py": "import os\n\ndef test_x(:\n    pass\n"}},
            "tests/test_t001_bad.py:3:",
        ),
        (
            {"test_files": {"test_t001_taken.py": "def test_new(): pass\n"}},
            "tests/test_t001_taken.py already exists in the repository with different content",
        ),
        ({"tldr": 5}, "tldr must be a string"),
    ]
    script = Script([write_seed(1, **change) for change, _ in cases] + [write_seed(1)])
    with FakeServer(script) as server:
        result = cli("prep-feature", str(repo), "--brief", "b", env=cli_env(server))
        requests = server.requests
    assert result.returncode == 0, result.stderr
    for number, (_, expected) in enumerate(cases, 1):
        seen = tool_messages(requests[number])[-1]
        assert seen.startswith("ERROR: write_seed rejected, nothing was written"), seen
        assert expected in seen, (expected, seen)
    session_dir = only_session(sessions_dir)
    rejected = SessionView.at(session_dir).payloads("seed_rejected")
    assert len(rejected) == len(cases)
    worktree = session_dir / "workspace"
    assert sorted(p.name for p in (worktree / "tests").iterdir()) == [
        "test_t001_feature_1.py",
        "test_t001_taken.py",
    ]
    assert (worktree / "tests/test_t001_taken.py").read_text() == "def test_old(): pass\n"
    assert len(SessionView.at(session_dir).prd()) == 1


def test_rejected_bundles_then_giving_up_leave_nothing_written(
    cli: RunCli, sessions_dir: Path, repo: Path
) -> None:
    script = Script(
        [
            write_seed(1, test_files={"test_t001_x.py": "def broken(:\n"}),
            reply("I give up."),
            reply("Really, I give up."),
        ]
    )
    with FakeServer(script) as server:
        result = cli("prep-feature", str(repo), "--brief", "b", env=cli_env(server))
        requests = server.requests
    assert result.returncode == 1
    assert "stopped calling tools" in result.stderr and "Traceback" not in result.stderr
    session_dir = only_session(sessions_dir)
    assert not (session_dir / "prd.json").exists()
    assert not (session_dir / "seed-meta.json").exists()
    assert not (session_dir / ".seed-staging").exists()
    assert not (session_dir / "workspace" / "tests").exists()
    # One nudge between the two tool-less replies, then the abort.
    assert "called no tool" in requests[2]["body"]["messages"][-1]["content"]
    assert len(requests) == 3
    assert SessionView.at(session_dir).status == "failed"
    stop = SessionView.at(session_dir).payloads("stop")
    assert len(stop) == 1 and stop[0]["reason"] == "no_case"
    assert "interview_nudge" in SessionView.at(session_dir).types()


def test_malformed_arguments_unknown_tools_and_one_nudge_are_recovered_from(
    cli: RunCli, sessions_dir: Path, repo: Path
) -> None:
    from tilth.model import tool_call_raw

    script = Script(
        [
            reply(None, tool_call_raw("write_seed", '{"prd_entries": [{"id": "T-0')),
            reply(None, tool_call_raw("ask_user", "[1, 2]")),
            reply(None, tool_call("bash", command="ls")),
            reply(None, tool_call("read_file", path="../outside.txt")),
            reply("Thinking out loud, no tool."),
            write_seed(1),
        ]
    )
    (repo.parent / "outside.txt").write_text("secret")
    with FakeServer(script) as server:
        result = cli("prep-feature", str(repo), "--brief", "b", env=cli_env(server))
        requests = server.requests
    assert result.returncode == 0, result.stderr
    cut = tool_messages(requests[1])[-1]
    assert "the arguments of this write_seed call could not be read" in cut
    assert "badly escaped" not in cut, "a cut-off call is not blamed on escaping"
    assert "must be a JSON object" in tool_messages(requests[2])[-1]
    assert "unknown tool 'bash'" in tool_messages(requests[3])[-1]
    escaped = tool_messages(requests[4])[-1]
    assert escaped.startswith("ERROR") and "secret" not in escaped
    assert "called no tool" in requests[5]["body"]["messages"][-1]["content"]
    assert SessionView.at(only_session(sessions_dir)).status == "prepared"
    results = SessionView.at(only_session(sessions_dir)).payloads("tool_result")
    assert [r["is_error"] for r in results] == [True, True, True, True, False]


def test_too_many_empty_responses_fail_the_prep(
    cli: RunCli, sessions_dir: Path, repo: Path
) -> None:
    from tilth.model import empty

    with FakeServer(Script([empty()] * 4)) as server:
        result = cli("prep-feature", str(repo), "--brief", "b", env=cli_env(server))
    assert result.returncode == 1
    assert "empty responses" in result.stderr
    session_dir = only_session(sessions_dir)
    assert SessionView.at(session_dir).status == "failed"
    assert SessionView.at(session_dir).payloads("stop")[0]["reason"] == "empty_responses"


def test_model_endpoint_error_fails_cleanly(cli: RunCli, sessions_dir: Path, repo: Path) -> None:
    from tilth.model import error

    with FakeServer(Script([error(401, "bad key")])) as server:
        result = cli("prep-feature", str(repo), "--brief", "b", env=cli_env(server))
    assert result.returncode == 1
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert API_KEY not in result.stderr + result.stdout
    session_dir = only_session(sessions_dir)
    assert SessionView.at(session_dir).status == "failed"
    stop = SessionView.at(session_dir).payloads("stop")
    assert stop[0]["reason"] == "error" and "401" in stop[0]["error"]


def test_brief_from_stdin_and_empty_brief(cli: RunCli, sessions_dir: Path, repo: Path) -> None:
    with FakeServer(quick_script()) as server:
        result = cli("prep-feature", str(repo), input_text="add a thing\n", env=cli_env(server))
        assert result.returncode == 0, result.stderr
        assert "add a thing" in server.requests[0]["body"]["messages"][1]["content"]
        empty_brief = cli(
            "prep-feature", str(repo), "--keep-existing", input_text="\n", env=cli_env(server)
        )
        no_input = cli("prep-feature", str(repo), "--keep-existing", env=cli_env(server))
    assert empty_brief.returncode == 2 and "brief is empty" in empty_brief.stderr
    assert no_input.returncode == 2 and "--brief" in no_input.stderr
    assert len(session_dirs(sessions_dir)) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--force", "--keep-existing"], "mutually exclusive"),
        (["--answers", "/nonexistent/answers.txt"], "cannot read answers file"),
    ],
)
def test_usage_errors_create_nothing(
    cli: RunCli, sessions_dir: Path, repo: Path, args: list[str], message: str
) -> None:
    with FakeServer(quick_script()) as server:
        result = cli("prep-feature", str(repo), "--brief", "b", *args, env=cli_env(server))
    assert result.returncode == 2
    assert message in result.stderr
    assert session_dirs(sessions_dir) == []


def test_not_a_repository_and_missing_model_settings(
    cli: RunCli, sessions_dir: Path, repo: Path, tmp_path: Path
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with FakeServer(quick_script()) as server:
        not_repo = cli("prep-feature", str(plain), "--brief", "b", env=cli_env(server))
    assert not_repo.returncode == 2 and "not a git repository" in not_repo.stderr
    unconfigured = cli("prep-feature", str(repo), "--brief", "b")
    assert unconfigured.returncode == 2 and "Traceback" not in unconfigured.stderr
    assert session_dirs(sessions_dir) == []


def test_a_failed_seed_commit_names_the_file_and_never_says_seed_written(
    cli: RunCli, sessions_dir: Path, repo: Path
) -> None:
    locks: list[Path] = []

    def lock_the_index_then_write(model: str, request: dict[str, object]) -> object:
        # Another git process (an editor, a crashed commit) holds the worktree's index.
        for gitdir in (repo / ".git" / "worktrees").iterdir():
            (gitdir / "index.lock").write_text("")
            locks.append(gitdir / "index.lock")
        return write_seed(1)

    with FakeServer(Script(lock_the_index_then_write)) as server:
        result = cli("prep-feature", str(repo), "--brief", "add a thing", env=cli_env(server))
    assert result.returncode != 0
    assert len(locks) == 1
    assert str(locks[0]) in result.stderr, result.stderr
    assert "remove the file manually" in result.stderr
    assert "seed written" not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert SessionView.at(only_session(sessions_dir)).status == "failed"


def test_an_interviewer_repeating_a_failing_call_ends_the_prep_naming_why(
    cli: RunCli, sessions_dir: Path, repo: Path
) -> None:
    stuck = reply(None, tool_call("read_file", path="no/such/file.py"))
    with FakeServer(Script([stuck] * 10)) as server:
        result = cli("prep-feature", str(repo), "--brief", "b", env=cli_env(server))
        asked = len(server.requests)
    assert result.returncode == 1
    assert asked == 3, "warned on the second failure, stopped on the third"
    assert "repeated the same failing read_file call 3 times" in result.stderr
    assert "TILTH_MAX_REPEATED_FAILURES=3" in result.stderr and "Traceback" not in result.stderr
    view = SessionView.at(only_session(sessions_dir))
    assert view.status == "failed" and view.payloads("stop")[0]["reason"] == "no_case"
    assert view.payloads("repeated_failure")[0]["tool"] == "read_file"
