"""``FileSeedSink``: validate a seed bundle, then write it all-or-nothing.

prd.json and seed-meta.json go to the session directory, the test files to
``<worktree>/tests/``. The write is a small transaction: every file (and a copy
of whatever it replaces) is staged in ``<session>/.seed-staging/``, an intent
record is written, then the staged files are moved into place and the intent is
removed — that removal is the commit point. ``recover`` (run before every write,
and callable by any command that opens the session) rolls an interrupted write
back, so a crash at any moment leaves either the old state or the new one.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilth.session.files import dumps, fsync_dir
from tilth.session.schemas import SCHEMAS
from tilth.session.seed_rules import SeedRuleError, check_seed, normalise_entries

STAGING_DIR = ".seed-staging"
INTENT_FILE = "intent.json"
INTENT_SCHEMA = SCHEMAS["intent"]
TESTS_DIR = "tests"

FaultHook = Callable[[str], None]
"""Called at named points of a write (``staged``, ``intent``, ``moved:<n>``); tests crash here."""


@dataclass(frozen=True)
class _Move:
    staged: Path
    target: Path
    backup: Path | None


def _write_synced(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _copy_into_place(source: Path, target: Path) -> None:
    """Atomically make ``target`` a copy of ``source``."""
    tmp = target.with_name(f".{target.name}.restore.tmp")
    _write_synced(tmp, source.read_bytes())
    os.replace(tmp, target)
    fsync_dir(target.parent)


def check_test_sources(test_files: dict[str, str], worktree: Path) -> None:
    """Each test file compiles and would not clobber a different file; ``SeedRuleError`` if not."""
    root = worktree.resolve()
    for name, content in test_files.items():
        shown = f"{TESTS_DIR}/{name}"
        try:
            compile(content, shown, "exec", dont_inherit=True)
        except SyntaxError as exc:
            raise SeedRuleError(
                f"test file {shown} does not compile: {shown}:{exc.lineno or 0}: {exc.msg}. "
                "Fix it and call write_seed again with the whole bundle."
            ) from None
        except ValueError as exc:  # e.g. a NUL byte in the source
            raise SeedRuleError(f"test file {shown} does not compile: {exc}") from None
        target = worktree / TESTS_DIR / name
        if not target.resolve().is_relative_to(root):
            raise SeedRuleError(f"test file {shown} would be written outside the worktree")
        if target.is_symlink() or target.is_dir():
            raise SeedRuleError(f"{shown} already exists in the repository and is not a file")
        if target.exists() and target.read_text(encoding="utf-8", errors="replace") != content:
            raise SeedRuleError(
                f"test file {shown} already exists in the repository with different content; "
                "choose another slug for the new test file"
            )


class FileSeedSink:
    """Writes seeds for one session: its directory and its worktree."""

    def __init__(
        self, session_dir: Path, worktree: Path, *, fault: FaultHook | None = None
    ) -> None:
        self.session_dir = session_dir
        self.worktree = worktree
        self._fault = fault or (lambda point: None)

    @property
    def staging(self) -> Path:
        return self.session_dir / STAGING_DIR

    def write_seed(self, prd_entries: Any, test_files: Any, meta: dict[str, Any]) -> list[str]:
        """Validate, then write prd.json, seed-meta.json and the tests as one transaction."""
        recover(self.session_dir)
        entries, files = check_seed(prd_entries, test_files)
        check_test_sources(files, self.worktree)
        plan: list[tuple[Path, bytes]] = [
            (self.worktree / TESTS_DIR / name, content.encode("utf-8"))
            for name, content in sorted(files.items())
        ]
        # prd.json last: its presence is what marks a session as seeded.
        plan.append((self.session_dir / "seed-meta.json", dumps(meta).encode("utf-8")))
        plan.append((self.session_dir / "prd.json", dumps(normalise_entries(entries)).encode()))
        self._transact(plan)
        return [f"{TESTS_DIR}/{name}" for name in sorted(files)]

    def _transact(self, plan: list[tuple[Path, bytes]]) -> None:
        staging = self.staging
        shutil.rmtree(staging, ignore_errors=True)
        moves: list[_Move] = []
        for number, (target, data) in enumerate(plan):
            staged = staging / "new" / str(number)
            _write_synced(staged, data)
            backup = None
            if target.exists():
                backup = staging / "old" / str(number)
                _write_synced(backup, target.read_bytes())
            moves.append(_Move(staged, target, backup))
        fsync_dir(staging)
        self._fault("staged")
        intent = {
            "schema": INTENT_SCHEMA,
            "moves": [
                {
                    "staged": str(m.staged),
                    "target": str(m.target),
                    "backup": str(m.backup) if m.backup else None,
                }
                for m in moves
            ],
        }
        _write_synced(staging / f".{INTENT_FILE}.tmp", json.dumps(intent).encode("utf-8"))
        os.replace(staging / f".{INTENT_FILE}.tmp", staging / INTENT_FILE)
        fsync_dir(staging)
        self._fault("intent")
        for number, move in enumerate(moves, 1):
            move.target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(move.staged, move.target)
            fsync_dir(move.target.parent)
            self._fault(f"moved:{number}")
        # The commit point: from here on the new state stands.
        (staging / INTENT_FILE).unlink()
        fsync_dir(staging)
        shutil.rmtree(staging, ignore_errors=True)


def recover(session_dir: Path) -> bool:
    """Roll back a seed write that did not finish; True when there was one to undo.

    Idempotent: a crash during recovery is recovered by the next call.
    """
    staging = session_dir / STAGING_DIR
    if not staging.exists():
        return False
    intent_path = staging / INTENT_FILE
    rolled_back = False
    if intent_path.exists():
        try:
            intent = json.loads(intent_path.read_text(encoding="utf-8"))
            moves = intent["moves"]
        except (OSError, ValueError, KeyError, TypeError):
            moves = None
        if isinstance(moves, list):
            for move in reversed(moves):
                target = Path(move["target"])
                backup = Path(move["backup"]) if move.get("backup") else None
                if backup is not None:
                    if backup.exists():
                        _copy_into_place(backup, target)
                else:
                    target.unlink(missing_ok=True)
                    fsync_dir(target.parent)
            rolled_back = True
        intent_path.unlink(missing_ok=True)
        fsync_dir(staging)
    shutil.rmtree(staging, ignore_errors=True)
    return rolled_back
