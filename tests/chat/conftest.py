"""Fixtures for the chat tests."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory nobody can write to: a read-only bind mount when running as root."""
    source = tmp_path / "ro-source"
    source.mkdir()
    target = tmp_path / "ro"
    target.mkdir()
    if os.geteuid() != 0:
        target.chmod(0o500)
        yield target
        target.chmod(0o700)
        return
    mounted = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("cannot make a read-only directory here")
    try:
        remount = ["mount", "-o", "remount,bind,ro", str(target)]
        if subprocess.run(remount, capture_output=True).returncode != 0:
            pytest.skip("cannot make a read-only directory here")
        yield target
    finally:
        subprocess.run(["umount", str(target)], capture_output=True)
