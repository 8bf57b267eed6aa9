"""A gate's result in a few words, for the progress sink: ``passed (3 tests)``, ``failed 2``.

The seed-test gate can take minutes on a real suite; the run says when it starts and how
it ended, so a watcher knows what the harness is doing. Counts come from pytest's closing
summary line; a ``TILTH_TEST_COMMAND`` that prints none is reported as passed or failed only.
"""

from __future__ import annotations

import re

from tilth.agent.gate.seed_tests import Check, GateRun

_SUMMARY_RE = re.compile(r"\b\d+ (?:failed|passed|errors?|skipped|deselected)\b.* in \d")
_COUNT_RE = re.compile(r"\b(\d+) (failed|passed|errors?)\b")
_TEST_CHECKS = ("pytest", "tests")


def pytest_counts(output: str) -> dict[str, int]:
    """``failed``, ``passed`` and ``error`` from pytest's last summary line ({} when none)."""
    for line in reversed(output.splitlines()):
        if _SUMMARY_RE.search(line):
            counts: dict[str, int] = {}
            for number, word in _COUNT_RE.findall(line):
                key = "error" if word.startswith("error") else word
                counts[key] = counts.get(key, 0) + int(number)
            return counts
    return {}


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def check_outcome(check: Check) -> str:
    """One check as ``passed (3 tests)``, ``failed 2 (1 passed)`` or ``failed: timed out ...``."""
    first = check.output.strip().splitlines()[0] if check.output.strip() else ""
    if not check.passed and first.startswith("timed out after"):
        return "failed: " + first.split(":", 1)[0]
    counts = pytest_counts(check.output) if check.name in _TEST_CHECKS else {}
    if check.passed:
        passed = counts.get("passed")
        return f"passed ({_plural(passed, 'test')})" if passed else "passed"
    broken = counts.get("failed", 0) + counts.get("error", 0)
    if not broken:
        return "failed"
    extra = [_plural(counts["error"], "error")] if counts.get("error") else []
    extra += [f"{counts['passed']} passed"] if counts.get("passed") else []
    return f"failed {broken}" + (f" ({', '.join(extra)})" if extra else "")


def gate_outcome(gate: GateRun) -> str:
    """The whole gate in a few words; each check is named when there is more than one."""
    if gate.tampered:
        return f"refused: seed test file(s) changed ({', '.join(gate.tampered)})"
    if len(gate.checks) == 1:
        return check_outcome(gate.checks[0])
    named = [
        f"{'tests' if c.name in _TEST_CHECKS else c.name} {check_outcome(c)}" for c in gate.checks
    ]
    return ", ".join(named)


def outcome_style(gate: GateRun) -> str:
    """How the outcome line is drawn: green when it passed, yellow when the worker has to act."""
    return "green" if gate.passed else "yellow"
