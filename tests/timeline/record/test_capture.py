"""Turn capture: edit tools and bash, overlays over head, coverage gaps, exact restores."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import git, make_repo
from tests.trees import tree_hash
from tilth.timeline.record.blob_store import BlobStore
from tilth.timeline.record.turn_capture import BASH_GAP, TurnCapture, TurnResult
from tilth.timeline.rewind.code_restore import apply_code, keep_conflicts, plan_code


@dataclass
class Rig:
    """A repository, a store and a capture watching it."""

    root: Path
    store: BlobStore
    capture: TurnCapture

    def bash(self, command: str) -> TurnResult:
        """One bash turn the way the ToolBox brackets it."""
        self.capture.before_bash(command)
        subprocess.run(["bash", "-c", command], cwd=self.root, check=True)
        self.capture.after_bash(command)
        return self.capture.finish_turn()

    def edit(self, files: dict[str, str]) -> TurnResult:
        """One edit-tool turn: announce, then write."""
        for rel, text in files.items():
            self.capture.before_write(self.root / rel)
            (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.root / rel).write_text(text)
        return self.capture.finish_turn()

    def restore(self, target: TurnResult, latest: TurnResult | None = None, force: bool = False):  # type: ignore[no-untyped-def]
        plan = plan_code(
            self.root,
            target.head,
            target.overlay,
            latest.head if latest else None,
            latest.overlay if latest else None,
            force=force,
        )
        keep_conflicts(plan, self.root, self.store)
        apply_code(plan, self.root, self.store)
        self.capture.resync()
        return plan


@pytest.fixture(params=["inotify", "scan"])
def rig(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Rig]:
    if request.param == "scan":
        monkeypatch.setenv("TILTH_CAPTURE_WATCH", "scan")
    root = make_repo(
        tmp_path / "repo",
        {
            "README.md": "# demo\n",
            ".gitignore": ".venv/\n*.log\n",
            "src/app.py": "x = 1\n",
            "src/util.py": "y = 2\n",
        },
    )
    store = BlobStore(tmp_path / "home" / "snapshots")
    capture = TurnCapture(None, root, store)
    capture.resync()
    yield Rig(root, store, capture)
    capture.close()


def test_an_edit_turn_records_only_what_differs_from_head(rig: Rig) -> None:
    first = rig.edit({"src/app.py": "x = 10\n", "docs/new.md": "new\n"})
    assert set(first.overlay) == {"src/app.py", "docs/new.md"}
    assert first.files_changed == ["docs/new.md", "src/app.py"]
    assert rig.store.get(first.overlay["src/app.py"] or "") == b"x = 10\n"
    assert first.gaps == []
    # Writing the original content back takes the file out of the overlay.
    second = rig.edit({"src/app.py": "x = 1\n"})
    assert set(second.overlay) == {"docs/new.md"}
    assert second.files_changed == ["src/app.py"]


def test_a_bash_turn_sees_creates_modifies_deletes_renames_and_modes(rig: Rig) -> None:
    before = tree_hash(rig.root)
    start = rig.capture.finish_turn()
    result = rig.bash(
        "echo more >> src/app.py && rm src/util.py && mkdir -p pkg/deep && "
        "echo 'print(1)' > pkg/deep/tool.py && mv README.md README.txt && "
        "printf '#!/bin/sh\\n' > run.sh && chmod +x run.sh"
    )
    assert result.overlay["src/util.py"] is None
    assert result.overlay["README.md"] is None
    assert (result.overlay["run.sh"] or "").endswith(":x")
    assert {"src/app.py", "pkg/deep/tool.py", "README.txt"} <= set(result.overlay)
    assert set(result.files_changed) == {
        "src/app.py",
        "src/util.py",
        "pkg/deep/tool.py",
        "README.md",
        "README.txt",
        "run.sh",
    }
    assert BASH_GAP in result.gaps
    after = tree_hash(rig.root)
    plan = rig.restore(start, result)
    assert tree_hash(rig.root) == before
    assert set(plan.delete) == {"pkg/deep/tool.py", "README.txt", "run.sh"}
    assert set(plan.restore) == {"src/app.py", "src/util.py", "README.md"}
    rig.restore(result, start)
    assert tree_hash(rig.root) == after


def test_a_renamed_directory_is_followed(rig: Rig) -> None:
    rig.bash("mkdir -p a/b && echo 1 > a/b/one && echo 2 > a/two")
    moved = rig.bash("mv a z")
    assert set(moved.overlay) == {"z/b/one", "z/two"}
    assert set(moved.files_changed) == {"a/b/one", "a/two", "z/b/one", "z/two"}


def test_gaps_name_what_could_not_be_captured(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    rig.capture.cap = 100
    result = rig.bash(
        "mkdir -p .venv/lib && echo pkg > .venv/lib/x.py && echo log > debug.log && "
        "head -c 500 /dev/zero > blob.bin && ln -s /etc/hostname outside && ln -s src inside"
    )
    joined = "\n".join(result.gaps)
    assert "file over size cap: blob.bin (500 bytes)" in joined
    assert "ignored path changed, not captured:" in joined and "debug.log" in joined
    # A new ignored directory is one entry, never walked file by file.
    assert ".venv" in joined and ".venv/lib/x.py" not in joined
    assert "symlink points outside the workspace, target not captured: outside" in joined
    assert "inside" not in joined
    assert (result.overlay["inside"] or "").endswith(":l")
    assert "blob.bin" not in result.overlay and "debug.log" not in result.overlay
    assert BASH_GAP in result.gaps
    quiet = rig.edit({"src/app.py": "x = 3\n"})
    assert quiet.gaps == [], "an edit-only turn has nothing to report"


def test_a_commit_between_turns_empties_the_overlay(rig: Rig) -> None:
    first = rig.edit({"src/app.py": "x = 5\n", "new.txt": "n\n"})
    assert first.overlay
    git(rig.root, "add", "-A")
    git(rig.root, "commit", "-q", "-m", "stage")
    second = rig.edit({"other.txt": "o\n"})
    assert set(second.overlay) == {"other.txt"}
    assert second.head != first.head
    assert second.files_changed == ["other.txt"]
    rig.restore(first, second)
    assert git(rig.root, "rev-parse", "HEAD").strip() == first.head
    assert (rig.root / "src/app.py").read_text() == "x = 5\n"
    assert not (rig.root / "other.txt").exists()


def test_user_edits_are_conflicts_kept_unless_forced(rig: Rig) -> None:
    start = rig.capture.finish_turn()
    latest = rig.edit({"src/app.py": "agent\n", "agent.txt": "a\n"})
    (rig.root / "README.md").write_text("the user's notes\n")
    (rig.root / "mine.txt").write_text("user file\n")
    plan = rig.restore(start, latest)
    assert plan.conflicts == ["README.md", "mine.txt"]
    assert (rig.root / "README.md").read_text() == "the user's notes\n"
    assert (rig.root / "mine.txt").read_text() == "user file\n"
    assert (rig.root / "src/app.py").read_text() == "x = 1\n"
    assert not (rig.root / "agent.txt").exists()
    # The recorded state is now the restored one; the user's files still differ from it.
    forced = rig.restore(start, start, force=True)
    assert forced.conflicts == ["README.md", "mine.txt"]
    assert (rig.root / "README.md").read_text() == "# demo\n"
    assert not (rig.root / "mine.txt").exists()


def test_the_first_turn_without_observer_calls_still_sees_everything(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    (root / "a.txt").write_text("changed\n")
    (root / "b.txt").write_text("b\n")
    capture = TurnCapture(None, root, BlobStore(tmp_path / "s"), watch=False)
    result = capture.finish_turn()
    assert set(result.overlay) == {"a.txt", "b.txt"}
    os.remove(root / "b.txt")
    capture.before_bash("rm b.txt")
    capture.after_bash("rm b.txt")
    assert set(capture.finish_turn().overlay) == {"a.txt"}


def test_a_capture_failure_is_a_gap_not_a_crash(tmp_path: Path) -> None:
    import shutil

    root = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    capture = TurnCapture(None, root, BlobStore(tmp_path / "s"))
    capture.resync()
    shutil.rmtree(root / ".git")  # every git call fails from now on
    capture.before_write(root / "a.txt")
    (root / "a.txt").write_text("changed\n")
    capture.before_bash("true")
    capture.after_bash("true")
    result = capture.finish_turn()
    assert result.overlay == {}
    assert result.gaps[0].startswith("turn snapshot failed, files of this turn not captured")
    assert BASH_GAP in result.gaps
    capture.close()


def test_files_under_an_ignored_directory_are_counted_not_listed(rig: Rig) -> None:
    # Like .pytest_cache: the directory ignores its own contents with a "*" .gitignore.
    result = rig.bash(
        "mkdir -p cache/v && printf '*\\n' > cache/.gitignore && "
        "for i in 1 2 3 4 5; do echo $i > cache/v/f$i; done"
    )
    joined = "\n".join(result.gaps)
    assert "ignored path changed, not captured: cache/ (" in joined  # counted, not listed
    assert "cache/v/f1" not in joined


def test_a_file_over_the_cap_is_reported_once_where_it_changed(rig: Rig, tmp_path: Path) -> None:
    from tilth.session.store import Session

    session = Session.create(tmp_path / "sessions", rig.root)
    rig.capture.close()
    rig.capture = TurnCapture(session, rig.root, rig.store, cap=100)
    rig.capture.resync()
    first = rig.bash("head -c 500 /dev/zero > blob.bin")
    assert "blob.bin" in first.files_changed
    assert any("file over size cap: blob.bin" in gap for gap in first.gaps)
    later = [
        rig.bash("echo more >> src/util.py"),
        rig.edit({"src/app.py": "x = 9\n"}),
    ]
    # A new process (a resumed run) takes stock afresh; the big file is still as it was.
    rig.capture.close()
    rig.capture = TurnCapture(session, rig.root, rig.store, cap=100)
    later.append(rig.capture.finish_turn())  # a turn without tool calls comes first
    assert later[-1].files_changed == [] and later[-1].overlay == later[-2].overlay
    later.append(rig.edit({"src/app.py": "x = 10\n"}))
    for result in later:
        assert "blob.bin" not in result.files_changed, result.files_changed
        assert not any("blob.bin" in gap for gap in result.gaps), result.gaps
    changed_again = rig.bash("head -c 600 /dev/zero > blob.bin")
    assert "blob.bin" in changed_again.files_changed
    assert any("file over size cap: blob.bin (600 bytes)" in g for g in changed_again.gaps)
