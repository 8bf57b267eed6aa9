"""Per-task evaluator ledgers: ``ledger/<T-NNN>.jsonl``, append-only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tilth.session.events import utc_now
from tilth.session.files import append_line
from tilth.session.records import read_line_records
from tilth.session.schemas import SCHEMAS
from tilth.session.validate import ledger_entry_problem

LEDGER_SCHEMA = SCHEMAS["ledger"]


class Ledger:
    """Reads and appends the ledgers under one session's ``ledger/`` directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, task_id: str) -> Path:
        """The ledger file for ``task_id``."""
        return self.directory / f"{task_id}.jsonl"

    def append(self, task_id: str, entry: dict[str, Any]) -> dict[str, Any]:
        """Append ``entry`` (stamped with its schema and ``ts``) and return what was written."""
        self.directory.mkdir(parents=True, exist_ok=True)
        record = {"schema": LEDGER_SCHEMA, "ts": utc_now(), **entry}
        append_line(
            self.path(task_id), json.dumps(record, ensure_ascii=False, default=str), repair=True
        )
        return record

    def read(self, task_id: str, limit: int | None = None) -> list[dict[str, Any]]:
        """Entries oldest first; ``limit`` keeps the last N. Bad lines are skipped (and
        ``tilth doctor`` names them: ``tilth.session.validate.ledger_entry_problem``)."""
        entries, _ = read_line_records(self.path(task_id), ledger_entry_problem)
        if limit is not None:
            return entries[-limit:] if limit > 0 else []
        return entries

    def count(self, task_id: str) -> int:
        """How many readable entries ``task_id`` has."""
        return len(self.read(task_id))

    def task_ids(self) -> list[str]:
        """Tasks that have a ledger, sorted."""
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.jsonl"))
