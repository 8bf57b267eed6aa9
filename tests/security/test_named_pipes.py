"""A named pipe the worker leaves in its worktree cannot hang Tilth's git.

git opens every ``.gitignore`` and ``.gitattributes`` it walks past, and the ``HEAD`` of a
repository nested in the worktree; opening a FIFO with no writer waits for ever. One
``mkfifo .gitignore`` made every later stage commit, diff and rewind of the session hang
until git's timeout, run after run.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent.support import GOOD, TASKS, model_env, recipes, seed_session, team_server, tilth

from tests.conftest import make_repo
from tilth import git as tilth_git
from tilth.demo.script import Recipe, Team
from tilth.git.pipes import remove_named_pipes
from tilth.model.script import tool_call

PIPES = (
    "mkfifo .gitignore tests/.gitattributes && mkdir -p n/.git/refs n/.git/objects && "
    "mkfifo n/.git/HEAD && echo pipes-made"
)
CODE_MAKES_A_PIPE = (
    "import os\n\nos.mkfifo('textkit/.gitignore')\n\n\n" + GOOD["T-001"]["textkit/words.py"]
)


def test_pipes_made_by_bash_or_by_the_tested_code_do_not_stop_the_run(
    repo: Path, sessions_dir: Path
) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    recipe = Recipe({"textkit/words.py": CODE_MAKES_A_PIPE}, test_command="true")
    recipe.probes = [tool_call("bash", command=PIPES)]
    with team_server(Team(recipes(T_001=recipe))) as server:
        result = tilth("run", str(repo), env=model_env(server.base_url), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert seeded.statuses() == {"T-001": "done"}
    results = " ".join(str(e.payload) for e in seeded.events() if e.type == "tool_result")
    assert "pipes-made" in results and "[harness] removed named pipe(s)" in results
    assert not (seeded.worktree / "textkit" / ".gitignore").exists()


def test_remove_named_pipes_leaves_everything_else(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"a.txt": "a\n", "d/b.txt": "b\n"})
    os.mkfifo(root / "d" / ".gitignore")
    (root / "link").symlink_to("/dev/null")
    outside = tmp_path / "outside"
    outside.mkdir()
    os.mkfifo(outside / "p")
    (root / "out").symlink_to(outside)  # never followed
    assert remove_named_pipes(root) == ["d/.gitignore"]
    assert (outside / "p").exists() and (root / "link").is_symlink()
    assert tilth_git.is_dirty(root)  # git walks the tree again without waiting
