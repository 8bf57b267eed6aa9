"""``FileSeedSink``: validation before any write, and crash safety of the write itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from seed.support import CRASHER, seed_args
from tests.sessionview import SessionView
from tilth.seed.sink import STAGING_DIR, FileSeedSink, recover
from tilth.session.seed_rules import SeedRuleError

META = {"schema": 1, "tldr": "first"}


def layout(tmp_path: Path) -> tuple[Path, Path]:
    session_dir = tmp_path / "session"
    worktree = session_dir / "workspace"
    (worktree / "src").mkdir(parents=True)
    (worktree / "src" / "app.py").write_text("x = 1\n")
    (session_dir / "checkpoint.json").write_text("{}\n")
    return session_dir, worktree


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (staging excluded) with its bytes."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and STAGING_DIR not in p.relative_to(root).parts
    }


def bundle_b() -> dict[str, Any]:
    """A second bundle: keeps T-001's test verbatim, adds T-002."""
    return seed_args(2)


def test_written_files(tmp_path: Path) -> None:
    session_dir, worktree = layout(tmp_path)
    args = seed_args(1)
    written = FileSeedSink(session_dir, worktree).write_seed(
        args["prd_entries"], args["test_files"], META
    )
    assert written == ["tests/test_t001_feature_1.py"]
    assert (worktree / written[0]).read_text() == args["test_files"]["test_t001_feature_1.py"]
    prd = SessionView.at(session_dir).prd()
    assert prd[0]["status"] == "pending" and set(prd[0]) == {
        "id",
        "title",
        "description",
        "acceptance_criteria",
        "status",
    }
    assert json.loads((session_dir / "seed-meta.json").read_text()) == META
    assert not (session_dir / STAGING_DIR).exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"test_files": {"test_t001_x.py": "def f(:\n"}}, "tests/test_t001_x.py:1:"),
        ({"test_files": {"test_t001_x.py": "x = '\x00'\x00\n"}}, "does not compile"),
        ({"test_files": {"test_t001_x.py": 3}}, "content must be a string"),
        ({"prd_entries": "T-001"}, "non-empty list"),
    ],
)
def test_rejected_bundle_writes_nothing(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    session_dir, worktree = layout(tmp_path)
    before = snapshot(session_dir)
    args = seed_args(1, **change)
    with pytest.raises(SeedRuleError, match=message.replace("(", r"\(")):
        FileSeedSink(session_dir, worktree).write_seed(
            args["prd_entries"], args["test_files"], META
        )
    assert snapshot(session_dir) == before
    assert not (session_dir / STAGING_DIR).exists()


def test_existing_file_same_content_is_fine_different_is_not(tmp_path: Path) -> None:
    session_dir, worktree = layout(tmp_path)
    args = seed_args(1)
    (worktree / "tests").mkdir()
    target = worktree / "tests" / "test_t001_feature_1.py"
    target.write_text(args["test_files"]["test_t001_feature_1.py"])
    sink = FileSeedSink(session_dir, worktree)
    sink.write_seed(args["prd_entries"], args["test_files"], META)
    target.write_text("def test_mine(): pass\n")
    with pytest.raises(SeedRuleError, match="already exists in the repository"):
        sink.write_seed(args["prd_entries"], args["test_files"], META)
    assert target.read_text() == "def test_mine(): pass\n"


def test_a_tests_symlink_out_of_the_worktree_is_refused(tmp_path: Path) -> None:
    session_dir, worktree = layout(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (worktree / "tests").symlink_to(outside)
    args = seed_args(1)
    with pytest.raises(SeedRuleError, match="outside the worktree"):
        FileSeedSink(session_dir, worktree).write_seed(
            args["prd_entries"], args["test_files"], META
        )
    assert list(outside.iterdir()) == []


# ---- crash safety ------------------------------------------------------------------------------
POINTS = ["staged", "intent", "moved:1", "moved:2", "moved:3", "moved:4"]


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_mid_write_is_rolled_back_to_the_previous_seed(tmp_path: Path, point: str) -> None:
    session_dir, worktree = layout(tmp_path)
    first = seed_args(1)
    FileSeedSink(session_dir, worktree).write_seed(first["prd_entries"], first["test_files"], META)
    before = snapshot(session_dir)
    crashed = subprocess.run(
        [
            sys.executable,
            "-c",
            CRASHER,
            str(session_dir),
            str(worktree),
            point,
            json.dumps(bundle_b()),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert crashed.returncode == 17, crashed.stderr
    assert (session_dir / STAGING_DIR).exists()
    assert recover(session_dir) == (point != "staged")
    assert snapshot(session_dir) == before
    assert not (session_dir / STAGING_DIR).exists()
    assert recover(session_dir) is False


def test_the_next_write_rolls_back_an_interrupted_one_first(tmp_path: Path) -> None:
    session_dir, worktree = layout(tmp_path)
    crashed = subprocess.run(
        [
            sys.executable,
            "-c",
            CRASHER,
            str(session_dir),
            str(worktree),
            "moved:2",
            json.dumps(bundle_b()),
        ],
        capture_output=True,
        timeout=60,
    )
    assert crashed.returncode == 17
    # The crashed bundle's second test file was already moved into place.
    assert (worktree / "tests" / "test_t002_feature_2.py").exists()
    args = seed_args(1)
    FileSeedSink(session_dir, worktree).write_seed(args["prd_entries"], args["test_files"], META)
    assert sorted(p.name for p in (worktree / "tests").iterdir()) == ["test_t001_feature_1.py"]
    assert len(SessionView.at(session_dir).prd()) == 1


def test_recovery_interrupted_half_way_is_finished_by_the_next_call(tmp_path: Path) -> None:
    session_dir, worktree = layout(tmp_path)
    first = seed_args(1)
    FileSeedSink(session_dir, worktree).write_seed(first["prd_entries"], first["test_files"], META)
    before = snapshot(session_dir)
    subprocess.run(
        [
            sys.executable,
            "-c",
            CRASHER,
            str(session_dir),
            str(worktree),
            "moved:4",
            json.dumps(bundle_b()),
        ],
        capture_output=True,
        timeout=60,
    )
    # Simulate a recovery that restored prd.json and then died: run it, then put the intent back.
    intent = (session_dir / STAGING_DIR / "intent.json").read_bytes()
    staged = snapshot(session_dir / STAGING_DIR)
    recover(session_dir)
    for name, data in staged.items():
        path = session_dir / STAGING_DIR / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (session_dir / STAGING_DIR / "intent.json").write_bytes(intent)
    assert recover(session_dir) is True
    assert snapshot(session_dir) == before
