"""A huge file in the worktree cannot stall Tilth's git: it is never staged.

git hashes about 200 MB a second and a sparse file costs nothing to make: with a 20 GB
one in the worktree every stage commit, the evaluator's diff and every rewind ran past
git's timeout, and the session could neither go on nor go back.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import git, make_repo
from tilth import git as tilth_git
from tilth.timeline.rewind.change_report import tree_changes

HUGE = 40 * 1024**3  # sparse: no disk is used
READ_CAP = 64 * 1024**2
"""What Tilth and its git may read while handling a worktree that holds a HUGE file."""


def bytes_read() -> int:
    """Bytes this process and its reaped children (git) have read so far (``rchar``)."""
    with open("/proc/self/io") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("rchar:"))


def test_a_huge_file_is_left_out_quickly_and_said_so(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    base = tilth_git.head(repo)
    with open(repo / "huge.bin", "wb") as handle:
        handle.truncate(HUGE)
    (repo / "b.txt").write_text("b\n")
    started = bytes_read()
    diff = tilth_git.diff_with_untracked(repo, base)
    assert "+b" in diff and "# left out (over 100 MB, never committed): huge.bin" in diff
    assert tree_changes(repo, base) == [("delete", "b.txt")]
    assert tilth_git.commit_all(repo, "more") is not None
    assert tilth_git.commit_all(repo, "nothing new") is None  # the huge file stays aside
    assert bytes_read() - started < READ_CAP  # the huge file was never read
    assert git(repo, "ls-tree", "--name-only", "HEAD").split() == ["a.txt", "b.txt"]
    assert os.path.getsize(repo / "huge.bin") == HUGE  # left where it was


def test_a_tracked_file_grown_huge_keeps_its_committed_version(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"data.bin": "small\n"})
    with open(repo / "data.bin", "r+b") as handle:
        handle.truncate(HUGE)
    assert tilth_git.commit_all(repo, "grown", allow_empty=True) is not None
    assert git(repo, "show", "HEAD:data.bin") == "small\n"


def test_a_seed_test_made_huge_is_refused_at_once(tmp_path: Path) -> None:
    from tilth.agent.gate.seed_copies import changed_seed_tests, seed_copies

    test = "tests/test_t001_a.py"
    repo = make_repo(tmp_path / "repo", {test: "def test_a():\n    pass\n"})
    copies = seed_copies(repo, tilth_git.head(repo), ["T-001"])
    assert changed_seed_tests(repo, copies) == []
    with open(repo / test, "r+b") as handle:
        handle.truncate(HUGE)
    started = bytes_read()
    assert changed_seed_tests(repo, copies) == [test]
    assert bytes_read() - started < READ_CAP  # refused by its size, never hashed


def test_file_tools_read_a_huge_file_in_bounded_memory(tmp_path: Path) -> None:
    import tracemalloc

    from tilth.agent.prompts import context_files
    from tilth.tools import ToolBox

    (tmp_path / "AGENTS.md").write_bytes(b"rules\n")  # text first, then a huge hole
    with open(tmp_path / "AGENTS.md", "r+b") as handle:
        handle.truncate(HUGE)
    box = ToolBox(tmp_path)
    tracemalloc.start()
    try:
        read = box.dispatch("read_file", {"path": "AGENTS.md"})
        edit = box.dispatch(
            "edit_file", {"path": "AGENTS.md", "old_string": "rules", "new_string": "x"}
        )
        context, names = context_files(tmp_path, ("AGENTS.md",))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 200_000_000
    assert read.is_error and f"binary file ({HUGE} bytes)" in read.result  # the hole is NULs
    assert edit.is_error
    assert names == ["AGENTS.md"] and context.startswith("rules")
    (tmp_path / "log.txt").write_text("line\n" * 2_500_000)  # 12.5 MB of text
    read = box.dispatch("read_file", {"path": "log.txt"})
    assert read.result.endswith("[truncated: the file is 12500000 bytes]")
    edit = box.dispatch("edit_file", {"path": "log.txt", "old_string": "l", "new_string": "L"})
    assert edit.is_error and "too large for edit_file" in edit.result


def test_a_run_whose_worker_makes_a_huge_file_stays_small(
    repo: Path, sessions_dir: Path, tilth_home: Path
) -> None:
    """The turn's checkpoint capture read every changed file whole before the size cap
    applied: a 3 GB sparse file took Tilth to 3 GB of memory, a 40 GB one would kill it."""
    import subprocess
    import sys

    from agent.support import GOOD, TASKS, model_env, recipes, seed_session, team_server

    from tilth.demo.script import Recipe, Team
    from tilth.model.script import tool_call

    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    recipe = Recipe(GOOD["T-001"], test_command="true")
    recipe.probes = [tool_call("bash", command="truncate -s 3G huge.bin && echo made")]
    report = (
        "import resource, sys; print('MAXRSS', resource.getrusage(0).ru_maxrss, file=sys.stderr)"
    )
    code = f"import sys\nfrom tilth.cli import main\nrc = main(['run', sys.argv[1]])\n{report}\n"
    with team_server(Team(recipes(T_001=recipe))) as server:
        env = {**os.environ, **model_env(server.base_url), "TILTH_HOME": str(tilth_home)}
        done = subprocess.run(
            [sys.executable, "-c", code, str(repo)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert seeded.statuses() == {"T-001": "done"}, done.stderr[-2000:]
    kilobytes = int(done.stderr.split("MAXRSS")[1].split()[0])
    assert kilobytes < 1_000_000, f"{kilobytes // 1024} MB"
    listed = subprocess.run(
        [sys.executable, "-m", "tilth", "checkpoints", seeded.session.id, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "file over size cap: huge.bin" in listed.stdout, listed.stdout[-2000:]


def test_a_chat_whose_model_makes_a_huge_file_stays_small(tmp_path: Path) -> None:
    """``tilth chat`` snapshots what bash changed in DIR the same way, capped the same way."""
    import subprocess
    import sys

    from tests.chat.tty import chat_env, server_for
    from tilth.model import reply, tool_call

    work = tmp_path / "dir"
    work.mkdir()
    replies = [reply(None, tool_call("bash", command="truncate -s 3G huge.bin")), reply("done")]
    server = server_for(replies)
    report = "import resource; print('MAXRSS', resource.getrusage(0).ru_maxrss, file=sys.stderr)"
    code = f"import sys\nfrom tilth.cli import main\nmain(['chat', sys.argv[1]])\n{report}\n"
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(work)],
            input="make a big file\n",
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=chat_env(tmp_path / "home", server),
            timeout=120,
        )
    finally:
        server.stop()
    assert "MAXRSS" in done.stderr, done.stderr[-2000:]
    kilobytes = int(done.stderr.split("MAXRSS")[1].split()[0])
    assert kilobytes < 1_000_000, f"{kilobytes // 1024} MB"
