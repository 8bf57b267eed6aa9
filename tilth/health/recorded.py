"""Reading what Tilth recorded about a session, for ``tilth doctor``'s diagnosis and repairs.

Every function here is a pure read: the checkpoints (each holds ``prd.json`` and the
branch head of its instant), the event log (the source, every stage commit, the last
stop) and the seed commit however it can still be found.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tilth import git
from tilth.errors import SessionCorrupt
from tilth.git import worktrees as git_worktrees
from tilth.session.harness_state import HarnessState
from tilth.session.store import Session
from tilth.session.teardown import recorded_source
from tilth.timeline.record.checkpoints import list_checkpoints


def checkpoints_of(session: Session) -> list[Any]:
    """The session's checkpoints, oldest first (unreadable ones skipped)."""
    return list_checkpoints(session)


def checkpoint_json(session: Session) -> dict[str, Any] | None:
    """``checkpoint.json``, or None when it is missing or unreadable."""
    try:
        return session.record().to_dict()
    except (SessionCorrupt, OSError):
        return None


def source_of(session: Session, given: Path | None = None) -> Path | None:
    """The source repository to use: ``given`` when it is one, else the recorded one."""
    if given is not None:
        return given.expanduser().resolve()
    return recorded_source(session)


def is_repo(path: Path | None) -> bool:
    """True when ``path`` is a (non-bare) git repository's top level."""
    return path is not None and (path / ".git").exists()


_SHA_FIELDS = {
    "stage_completed": "sha",
    "commit": "sha",
    "seed_committed": "sha",
    "task_failed": "placeholder_sha",
    "branch_restored": "sha",
}


def recorded_commits(session: Session) -> list[tuple[str, str]]:
    """``(sha, where)`` of every commit Tilth recorded, newest first.

    Events and checkpoints are merged by their place in the log: a checkpoint comes
    right after the event it was recorded at.
    """
    found: list[tuple[float, str, str]] = []
    for cp in checkpoints_of(session):
        found.append((cp.event_seq + 0.5, cp.head, f"checkpoint {cp.id}, {cp.label}"))
    for event in session.events.events():
        sha = event.payload.get(_SHA_FIELDS.get(event.type, ""))
        if isinstance(sha, str) and sha:
            found.append((event.seq, sha, f"the {event.type} event #{event.seq}"))
    return [(sha, where) for _, sha, where in sorted(found, key=lambda f: -f[0])]


def last_recorded_commit(session: Session, repo: Path) -> tuple[str, str] | None:
    """The newest recorded commit that still exists in ``repo``."""
    for sha, where in recorded_commits(session):
        if git.rev_parse(sha, repo) is not None:
            return sha, where
    return None


def seed_sha(session: Session, repo: Path | None = None) -> str | None:
    """The seed commit: from the seed checkpoint, the log, or the branch's ``seed:`` commit."""
    seeds = [cp for cp in checkpoints_of(session) if cp.kind == "seed"]
    if seeds:
        return str(seeds[0].head)
    event = session.events.last("seed_committed")
    if event and event.payload.get("sha"):
        return str(event.payload["sha"])
    if repo is not None and git_worktrees.branch_exists(repo, session.branch):
        # The seed commit's subject is a contract (`seed: N task(s) + M acceptance test(s)`).
        out = git.git("log", "--format=%H", "--grep=^seed: ", session.branch, cwd=repo)
        shas = out.split()
        return shas[-1] if shas else None
    return None


_RESUMABLE = ("wall_clock", "token_cap", "interrupted")
_TASK_EVENTS = {
    "task_done": "done",
    "task_failed": "failed",
    "task_start": "in_progress",
    "task_retry": "in_progress",
    "stage_started": "in_progress",
}


def replay_statuses(session: Session, prd: list[Any], after_seq: int) -> list[Any]:
    """``prd`` with task statuses brought forward by the events logged after ``after_seq``."""
    latest: dict[str, str] = {}
    for event in session.events.events():
        status = _TASK_EVENTS.get(event.type)
        task_id = event.payload.get("task_id")
        if event.seq > after_seq and status and isinstance(task_id, str):
            latest[task_id] = status
    out = []
    for entry in prd:
        if isinstance(entry, dict) and entry.get("id") in latest:
            entry = {**entry, "status": latest[str(entry["id"])]}
        out.append(entry)
    return out


def status_now(session: Session, checkpoints: list[Any]) -> str:
    """The session status the record implies: the last stop, else the latest checkpoint's."""
    stop = session.events.last("stop")
    since = checkpoints[-1].event_seq if checkpoints else 0
    if stop is not None and stop.seq > since:
        reason = stop.payload.get("reason")
        if reason == "all_done":
            return "all_done"
        return "running" if reason in _RESUMABLE else "failed"
    recorded = HarnessState.from_dict(checkpoints[-1].state).status if checkpoints else None
    if recorded:
        return recorded
    return "prepared" if session.events.last("seed_committed") else "running"


CHAT_KIND = "chat"
ATTEMPT_KIND = "attempt"
"""The ``kind`` of an attempt's ``checkpoint.json`` (``tilth.attempts.task.KIND``)."""


def is_chat_record(session: Session) -> bool:
    """True for a ``tilth chat`` session (no branch, no worktree, no seed), however damaged."""
    cp = checkpoint_json(session)
    if cp is not None:
        return cp.get("kind") == CHAT_KIND
    start = session.events.last("session_start")
    if start is not None:
        return start.payload.get("kind") == CHAT_KIND
    # Neither record left: a chat's conversation is the one thread `chat`, and it has no seed.
    return (session.threads.directory / "chat.jsonl").exists() and not session.prd_path.exists()


def chat_directory_of(session: Session) -> Path | None:
    """The directory a chat session works in (``checkpoint.json``, else its first event)."""
    cp = checkpoint_json(session)
    raw = (cp or {}).get("workspace")
    if not raw:
        start = session.events.last("session_start")
        raw = start.payload.get("workspace") if start is not None else None
    return Path(str(raw)) if raw else None
