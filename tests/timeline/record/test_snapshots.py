"""The content-addressed blob store: dedup, integrity, size cap, file kinds."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest

from tests.conftest import git, make_repo
from tilth.errors import ConfigError
from tilth.timeline.record.blob_store import (
    BlobStore,
    SnapshotError,
    blob_id,
    git_blob_sha,
    max_file_bytes,
    read_state,
    store_state,
    write_entry,
)


def test_same_content_is_stored_once_and_reads_back(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "snapshots")
    first = store.put(b"hello\n" * 100)
    second = store.put(b"hello\n" * 100)
    assert first == second == blob_id(b"hello\n" * 100)
    assert len(list(store.iter_blobs())) == 1
    assert store.get(first) == b"hello\n" * 100
    # Compressed on disk, and named by fan-out directory + rest of the hash.
    path = store.path(first)
    assert path.parent.name == first[:2] and path.name == first[2:]
    assert path.stat().st_size < 600
    store.sync(wait=True)


def test_a_damaged_or_missing_blob_is_reported_never_returned(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "snapshots")
    blob = store.put(b"precious")
    store.path(blob).write_bytes(zlib.compress(b"tampered"))
    with pytest.raises(SnapshotError, match="damaged"):
        store.get(blob)
    store.path(blob).write_bytes(b"not zlib at all")
    with pytest.raises(SnapshotError, match="damaged"):
        store.get(blob)
    store.path(blob).unlink()
    with pytest.raises(SnapshotError, match="missing"):
        store.get(blob)
    with pytest.raises(SnapshotError, match="not a snapshot blob id"):
        store.get("../../etc/passwd")


def test_an_empty_blob_left_by_a_power_cut_is_rewritten(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "snapshots")
    blob = store.put(b"data")
    store.path(blob).write_bytes(b"")
    assert store.put(b"data") == blob
    assert store.get(blob) == b"data"


def test_git_blob_sha_matches_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"f.txt": "some content\n"})
    expected = git(repo, "rev-parse", "HEAD:f.txt").strip()
    assert git_blob_sha(b"some content\n") == expected


def test_size_cap_setting_and_gap(tmp_path: Path) -> None:
    assert max_file_bytes({}) == 32 << 20
    assert max_file_bytes({"TILTH_CHECKPOINT_MAX_FILE_BYTES": "10"}) == 10
    with pytest.raises(ConfigError, match="TILTH_CHECKPOINT_MAX_FILE_BYTES"):
        max_file_bytes({"TILTH_CHECKPOINT_MAX_FILE_BYTES": "ten"})
    store = BlobStore(tmp_path / "snapshots")
    (tmp_path / "big.bin").write_bytes(b"x" * 11)
    state = read_state(tmp_path / "big.bin")
    assert state is not None
    outcome = store_state(store, "big.bin", state, cap=10)
    assert outcome.entry is None
    assert outcome.gap == "file over size cap: big.bin (11 bytes)"
    assert list(store.iter_blobs()) == []


def test_entries_restore_files_executables_links_and_deletions(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "snapshots")
    src = tmp_path / "src"
    src.mkdir()
    (src / "plain.txt").write_text("plain")
    (src / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(src / "run.sh", 0o755)
    os.symlink("plain.txt", src / "link")
    entries = {}
    for name in ("plain.txt", "run.sh", "link"):
        state = read_state(src / name)
        assert state is not None
        entries[name] = store_state(store, name, state, cap=1 << 20).entry
    assert entries["run.sh"].endswith(":x") and entries["link"].endswith(":l")
    dst = tmp_path / "dst"
    (dst / "plain.txt").mkdir(parents=True)  # a directory where a file must come back
    (dst / "gone" / "deep").mkdir(parents=True)
    (dst / "gone" / "deep" / "f").write_text("x")
    for name, entry in entries.items():
        write_entry(store, dst, name, entry)
    write_entry(store, dst, "gone/deep/f", None)
    assert (dst / "plain.txt").read_text() == "plain"
    assert os.access(dst / "run.sh", os.X_OK)
    assert os.readlink(dst / "link") == "plain.txt"
    assert not (dst / "gone").exists(), "emptied directories are removed too"
    assert dst.is_dir(), "but never the root itself"
