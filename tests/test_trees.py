"""``tests.trees.tree_hash``, which the go-back tests trust to tell two trees apart."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import make_repo
from tests.trees import tree_hash


def test_the_digest_moves_with_what_a_commit_would_hold_and_nothing_else(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {".gitignore": "build/\n", "a.py": "a\n", "b.py": "b\n"})
    seen = [tree_hash(repo)]

    def changed() -> bool:
        seen.append(tree_hash(repo))
        return seen[-1] != seen[-2]

    (repo / "build").mkdir()
    (repo / "build" / "out.o").write_text("ignored\n")
    assert not changed(), "an ignored file is no part of a commit"
    (repo / "a.py").write_text("A\n")
    assert changed(), "an edited tracked file"
    (repo / "new.py").write_text("n\n")
    assert changed(), "an untracked file"
    os.chmod(repo / "b.py", 0o755)
    assert changed(), "an executable bit"
    (repo / "b.py").unlink()
    (repo / "b.py").symlink_to("a.py")
    assert changed(), "a file that became a link"
    (repo / "b.py").unlink()
    assert changed(), "a deleted tracked file"
    (repo / "b.py").write_text("b\n")
    (repo / "a.py").write_text("a\n")
    (repo / "new.py").unlink()
    assert seen[-1] != tree_hash(repo) == seen[0], "the first tree again"
