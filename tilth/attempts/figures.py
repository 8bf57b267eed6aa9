"""One attempt's figures, read from its session, and the choice of a winner by checks.

The order of the checks is SPEC §11's: the seed tests and the ratchet pass; the
evaluator accepted; fewer failed gates on the way; the smaller diff; fewer tokens.
The choice is pure: figures in, a winner and every attempt's reason out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from tilth import git
from tilth.session.events import EventLog
from tilth.session.store import Session


@dataclass
class AttemptFigures:
    """What the checks saw of one attempt at one task."""

    session: str
    passed: bool
    """The task ended done: its seed tests and the verifying ratchet passed."""
    accepted: bool
    """The evaluator's last code review accepted the work."""
    failed_gates: int
    """Seed-test and ratchet runs that failed on the way."""
    diff_lines: int
    """Lines added plus lines removed since the task's start."""
    tokens: int
    """Tokens this attempt spent."""
    reason: str = ""
    """Why it won, or why it lost to the winner."""
    failure: str | None = None
    """The task's failure reason when it did not pass (``iter_cap``, ``evaluator_cap``...)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``attempt_selected`` and ``tilth attempts --json`` carry."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AttemptFigures:
        """Read one back from an ``attempt_selected`` event."""
        return cls(
            session=str(data.get("session") or ""),
            passed=bool(data.get("passed")),
            accepted=bool(data.get("accepted")),
            failed_gates=int(data.get("failed_gates") or 0),
            diff_lines=int(data.get("diff_lines") or 0),
            tokens=int(data.get("tokens") or 0),
            reason=str(data.get("reason") or ""),
            failure=data.get("failure") if isinstance(data.get("failure"), str) else None,
        )


def measure(child: Session, task_id: str, base_commit: str, start_tokens: int) -> AttemptFigures:
    """The figures of the attempt ``child`` at ``task_id``, begun at ``base_commit``."""
    accepted, failed_gates, failure = False, 0, None
    for event in EventLog(child.events.path).events():
        payload = event.payload
        if payload.get("task_id") != task_id:
            continue
        if event.type == "tests_run" and not payload.get("passed"):
            failed_gates += 1
        elif event.type == "evaluator_verdict" and payload.get("stage") == "code_review":
            accepted = payload.get("verdict") == "accept"
        elif event.type == "task_failed":
            failure = str(payload.get("reason") or "error")
    status = next((t.status for t in child.tasks() if t.id == task_id), "pending")
    return AttemptFigures(
        session=child.id,
        passed=status == "done",
        accepted=accepted,
        failed_gates=failed_gates,
        diff_lines=_diff_lines(child, base_commit, task_id),
        tokens=max(0, child.tokens_used - start_tokens),
        failure=None if status == "done" else (failure or "unfinished"),
    )


def _diff_lines(child: Session, base_commit: str, task_id: str) -> int:
    """Lines changed from ``base_commit`` to the attempt's last stage commit (a FAILED
    placeholder counts too: it holds the attempt's work)."""
    worktree = child.workspace_dir
    if not worktree.is_dir():
        return 0
    out = git.git("diff", "--numstat", base_commit, "HEAD", cwd=worktree)
    total = 0
    for line in out.splitlines():
        added, removed, *_ = [*line.split("\t"), "", ""]
        total += int(added) if added.isdigit() else 0
        total += int(removed) if removed.isdigit() else 0
    return total


def _key(figures: AttemptFigures) -> tuple[int, int, int, int, int]:
    return (
        0 if figures.passed else 1,
        0 if figures.accepted else 1,
        figures.failed_gates,
        figures.diff_lines,
        figures.tokens,
    )


_CHECKS = (
    (
        "passed",
        "its seed tests and the ratchet passed",
        "its seed tests or the ratchet did not pass",
    ),
    ("accepted", "the evaluator accepted it", "the evaluator did not accept it"),
    ("failed_gates", "fewer failed gates", "more failed gates"),
    ("diff_lines", "the smaller diff", "a larger diff"),
    ("tokens", "fewer tokens", "more tokens"),
)


def choose(attempts: list[AttemptFigures]) -> int:
    """The index of the winner (ties go to the earlier attempt); fills in every reason."""
    if not attempts:
        raise ValueError("no attempts to choose from")
    order = sorted(range(len(attempts)), key=lambda i: (_key(attempts[i]), i))
    best = order[0]
    winner = attempts[best]
    beaten: list[str] = []
    for index, other in enumerate(attempts):
        if index == best:
            continue
        decisive = _decisive(winner, other)
        other.reason = f"lost to {winner.session}: {decisive[1]}"
        beaten.append(decisive[0])
    head = "passed" if winner.passed else "the best of attempts that all failed"
    if not beaten:
        winner.reason = f"{head}; the only attempt"
    else:
        why = ", ".join(dict.fromkeys(beaten))
        winner.reason = f"{head}; chosen by {why}"
    return best


def _decisive(winner: AttemptFigures, other: AttemptFigures) -> tuple[str, str]:
    """The first check that tells ``winner`` from ``other``: (what won, what lost)."""
    for (name, won, lost), a, b in zip(_CHECKS, _key(winner), _key(other), strict=True):
        if a != b:
            if name in ("failed_gates", "diff_lines", "tokens"):
                return won, f"{lost} ({getattr(other, name):,} against {getattr(winner, name):,})"
            return won, lost
    return "the earlier attempt on a tie", "a tie on every check; the earlier attempt wins"
