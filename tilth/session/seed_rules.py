"""The seed rules: one module shared by the seed sink and ``reset --to-seed``.

``check_prd`` validates the task list alone (what ``reset --to-seed`` re-checks,
since the tests are already committed); ``check_seed`` adds the test-file rules
the sink enforces when the interview writes a bundle.
"""

from __future__ import annotations

import re
from typing import Any

from tilth.errors import TilthError

REQUIRED_PRD_KEYS = ("id", "title", "description", "acceptance_criteria")
TASK_ID_RE = re.compile(r"^T-\d{3,}$")
TEST_FILE_RE = re.compile(r"^test_t\d{3,}_[a-z0-9_]+\.py$")
TASK_STATUSES = ("pending", "in_progress", "done", "failed")
TIERS = ("L1", "L2")


class SeedRuleError(TilthError):
    """A seed bundle or prd.json breaks a seed rule; the message names which."""


def test_prefix(task_id: str) -> str:
    """The filename prefix of ``task_id``'s tests: ``T-001`` → ``test_t001_``."""
    return f"test_{task_id.lower().replace('-', '')}_"


def check_prd(entries: Any) -> list[dict[str, Any]]:
    """Validate a task list; returns it typed, or raises ``SeedRuleError``."""
    if not isinstance(entries, list) or not entries:
        raise SeedRuleError("prd_entries must be a non-empty list; a seed needs at least one task")
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise SeedRuleError(f"prd entry #{index + 1} is not an object")
        missing = [key for key in REQUIRED_PRD_KEYS if key not in entry]
        if missing:
            raise SeedRuleError(
                f"prd entry #{index + 1} is missing required key(s) {', '.join(missing)}"
            )
        task_id = entry["id"]
        if not isinstance(task_id, str) or not TASK_ID_RE.match(task_id):
            raise SeedRuleError(f"task id must match T-NNN with 3+ digits, got {task_id!r}")
        if task_id in seen:
            raise SeedRuleError(f"duplicate task id {task_id}")
        seen.add(task_id)
        criteria = entry["acceptance_criteria"]
        if not isinstance(criteria, list) or not criteria:
            raise SeedRuleError(f"task {task_id}: acceptance_criteria must be a non-empty list")
        tier = entry.get("tier")
        if tier is not None and tier not in TIERS:
            raise SeedRuleError(f"task {task_id}: tier must be one of {', '.join(TIERS)}")
    return entries


def check_test_files(entries: list[dict[str, Any]], test_files: Any) -> dict[str, str]:
    """Validate test filenames against the tasks: every file has a task and vice versa."""
    if not isinstance(test_files, dict) or not test_files:
        raise SeedRuleError("test_files must be a non-empty object; every task needs a test file")
    for name, content in test_files.items():
        if not isinstance(name, str) or not TEST_FILE_RE.match(name):
            raise SeedRuleError(
                f"test filename {name!r} does not match test_t<NNN>_<slug>.py "
                "(lowercase slug, digits and underscores)"
            )
        if not isinstance(content, str):
            raise SeedRuleError(f"test file {name}: content must be a string")
    prefixes = {test_prefix(e["id"]): e["id"] for e in entries}
    covered: set[str] = set()
    for name in test_files:
        owner = next((tid for prefix, tid in prefixes.items() if name.startswith(prefix)), None)
        if owner is None:
            raise SeedRuleError(f"test file {name} does not belong to any task in prd_entries")
        covered.add(owner)
    uncovered = [e["id"] for e in entries if e["id"] not in covered]
    if uncovered:
        raise SeedRuleError(
            f"no test file for task(s) {', '.join(uncovered)}: every task needs "
            "a test_t<NNN>_<slug>.py"
        )
    return test_files


def check_seed(entries: Any, test_files: Any) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Validate a whole bundle (prd entries plus test files)."""
    checked = check_prd(entries)
    return checked, check_test_files(checked, test_files)


def normalise_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rebuild entries with only the known keys and status ``pending``."""
    out = []
    for e in entries:
        task = {
            "id": e["id"],
            "title": str(e["title"]),
            "description": str(e["description"]),
            "acceptance_criteria": [str(c) for c in e["acceptance_criteria"]],
            "status": "pending",
        }
        if e.get("tier") in TIERS:
            task["tier"] = e["tier"]
        out.append(task)
    return out
