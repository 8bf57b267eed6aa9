"""Diagnosing a damaged session, and repairing it from what Tilth recorded (``recorded``).

``diagnose`` is a pure read: a list of ``Problem`` rows, each with the repair
that fixes it (or, when nothing recorded can, what the user can do). ``repair``
carries out one problem's fix. Problems depend on each other (the worktree cannot
be re-created before the branch exists, nor the branch before the source is
found), so a caller repairs the first repairable problem and diagnoses again.

What the record offers: every checkpoint holds a copy of ``prd.json`` and the
branch head of its instant; the event log names the source repository and the
commits of every stage; the seed checkpoint names the seed commit.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tilth import git
from tilth.errors import GitError, SessionCorrupt, TilthError
from tilth.git import worktrees as git_worktrees
from tilth.health.journal_repair import close_journal, journal_problems
from tilth.health.problem import Problem
from tilth.health.recorded import (
    ATTEMPT_KIND,
    CHAT_KIND,
    chat_directory_of,
    checkpoint_json,
    checkpoints_of,
    is_chat_record,
    is_repo,
    last_recorded_commit,
    replay_statuses,
    seed_sha,
    source_of,
    status_now,
)
from tilth.health.records import RECORD_REPAIRS, record_problems
from tilth.session.events import Event, EventLog, payloads_of, utc_now
from tilth.session.files import atomic_write_json, read_json
from tilth.session.store import CHECKPOINT_SCHEMA, Session
from tilth.session.teardown import recorded_source
from tilth.session.validate import prd_problem
from tilth.timeline.record.log_epoch import raise_epoch


# ---- diagnosis --------------------------------------------------------------------------------
def diagnose(session: Session, *, source: Path | None = None) -> list[Problem]:
    """Every problem found, in the order they must be repaired."""
    problems: list[Problem] = []
    reset = f"discard the session with `tilth reset {session.id}`"
    cp = checkpoint_json(session)
    if cp is None:
        problems.append(
            Problem(
                "checkpoint",
                "checkpoint.json is missing or unreadable",
                "rebuild checkpoint.json from the event log and the latest checkpoint",
            )
        )
    if is_chat_record(session):
        return problems + _chat_problems(session, reset) + record_problems(session)
    repo = _source_problem(session, source, problems, reset)
    if not session.events.path.exists():
        problems.append(
            Problem(
                "events",
                "events.jsonl is missing: a run would silently start its history afresh",
                "start a new events.jsonl that records the loss, with the seed commit taken "
                "from the seed checkpoint (the old event history itself is gone)",
            )
        )
    problems += _prd_problems(session, reset)
    problems += journal_problems(session)
    if repo is not None:
        problems += _git_problems(session, repo, reset)
    return problems + record_problems(session)


def _chat_problems(session: Session, reset: str) -> list[Problem]:
    """A chat session has no branch, worktree or seed: its log and its directory."""
    problems = []
    if not session.events.path.exists():
        problems.append(
            Problem(
                "events",
                "events.jsonl is missing: the chat would silently start its history afresh",
                "start a new events.jsonl that records the loss (the old history is gone)",
            )
        )
    directory = chat_directory_of(session)
    if directory is None or not directory.is_dir():
        problems.append(
            Problem(
                "directory",
                f"the chat's directory {directory or '(unknown)'} is gone",
                None,
                f"put it back where it was, or {reset}",
            )
        )
    return problems


def _source_problem(
    session: Session, given: Path | None, problems: list[Problem], reset: str
) -> Path | None:
    """The usable source repository, or None after adding why there is none."""
    recorded = recorded_source(session)
    if given is None and is_repo(recorded):
        return recorded
    if given is None:
        problems.append(
            Problem(
                "source",
                f"the source repository {recorded or '(unknown)'} is gone",
                None,
                f"if you moved it, run `tilth doctor {session.id} --repair --source NEWPATH`; "
                f"otherwise {reset}",
            )
        )
        return None
    new = given.expanduser().resolve()
    holds = is_repo(new) and (
        git_worktrees.branch_exists(new, session.branch)
        or any(git.rev_parse(sha, new) for sha in filter(None, [seed_sha(session, new)]))
    )
    if not holds:
        problems.append(
            Problem(
                "source",
                f"{new} does not hold {session.branch} or the seed commit of session {session.id}",
                None,
                "pass the repository the session was prepared in (--source PATH)",
            )
        )
        return None
    if recorded is not None and new == recorded.resolve():
        return new
    problems.append(
        Problem(
            "source",
            f"the session is recorded against {recorded or '(unknown)'}, not {new}",
            f"re-attach the session to {new} (checkpoint.json, and `git worktree repair`)",
        )
    )
    return None


def _prd_problems(session: Session, reset: str) -> list[Problem]:
    try:
        problem = prd_problem(read_json(session.prd_path, what="prd.json"), seed_rules=True)
    except FileNotFoundError:
        problem = "it is missing"
    except SessionCorrupt as exc:
        problem = exc.message
    if problem is None:
        return []
    what = f"prd.json is damaged: {problem}"
    copies = _valid_prd_copies(session)
    if not copies:
        return [Problem("prd", what, None, f"no checkpoint holds a copy; {reset}")]
    latest = copies[-1]
    fix = f"restore prd.json from {latest.id} ({latest.label}), with the task statuses logged since"
    return [Problem("prd", what, fix)]


def _git_problems(session: Session, repo: Path, reset: str) -> list[Problem]:
    branch = session.branch
    if not git_worktrees.branch_exists(repo, branch):
        found = last_recorded_commit(session, repo)
        if found is None:
            return [Problem("branch", f"branch {branch} is gone", None, reset)]
        sha, where = found
        return [
            Problem(
                "branch",
                f"branch {branch} is gone from {repo}",
                f"re-point {branch} at {sha[:12]}, the last recorded commit ({where})",
                f"or start over from it with `tilth fork {session.id} --at latest`",
            )
        ]
    worktree = session.workspace_dir
    if not worktree.is_dir() or worktree.resolve() not in git_worktrees.worktrees(repo):
        if worktree.is_dir() and any(worktree.iterdir()):
            return [
                Problem(
                    "worktree",
                    f"{worktree} is not a worktree of {repo}",
                    None,
                    f"move that directory away, then run `tilth doctor {session.id} --repair`",
                )
            ]
        return [Problem("worktree", f"the worktree {worktree} is missing", _recreate(session))]
    current = git.current_branch(worktree)
    if current != branch:
        where = "a detached HEAD" if current is None else f"branch {current}"
        tip, head = git.rev_parse(branch, repo), git.head(worktree)
        keeps = tip is not None and git.is_ancestor(tip, head, worktree)
        fix = f"check out {branch} in the worktree" + (
            f" at {head[:12]}, keeping the commits made off it" if keeps and tip != head else ""
        )
        return [Problem("head", f"the worktree is on {where}, not {branch}", fix)]
    return []


def _recreate(session: Session) -> str:
    return f"re-create the worktree at {session.workspace_dir} on {session.branch}"


# ---- repairs ----------------------------------------------------------------------------------
def repair(session: Session, problem: Problem, *, source: Path | None = None) -> str:
    """Carry out ``problem.fix``; returns what was done. Raises ``TilthError`` when it fails."""
    if problem.fix is None:
        raise TilthError(f"{problem.what}: nothing recorded can repair it", hint=problem.hint)
    action = _REPAIRS[problem.key]
    try:
        return action(session, source)
    except GitError as exc:
        raise TilthError(f"the repair failed: {exc.message}", hint=problem.hint) from None


def _rebuild_checkpoint(session: Session, source: Path | None) -> str:
    checkpoints = checkpoints_of(session)
    state = checkpoints[-1].state if checkpoints else {}
    events = session.events.events()
    started = events[0].ts if events else utc_now()
    origin = source_of(session, source)
    worktree = session.workspace_dir
    chat = is_chat_record(session)
    if chat:
        origin = worktree = chat_directory_of(session) or worktree
    atomic_write_json(
        session.checkpoint_path,
        {
            "schema": CHECKPOINT_SCHEMA,
            "session_id": session.id,
            **({"kind": CHAT_KIND} if chat else {}),
            "source": str(origin) if origin else None,
            "workspace": str(worktree) if worktree.is_dir() else None,
            "branch": None if chat else session.branch,
            "status": status_now(session, checkpoints),
            "tokens_used": int(state.get("tokens_used") or 0),
            "started_at": started,
            **_lineage(session, events),
            "repaired_at": utc_now(),
        },
    )
    return "rebuilt checkpoint.json"


def _lineage(session: Session, events: list[Event]) -> dict[str, Any]:
    """What a fork's or an attempt's ``checkpoint.json`` said of its parent, recovered
    from the logs: the child's own ``fork`` event, the parent's ``attempts_started``."""
    fork = next(
        (e for e in reversed(events) if e.type == "fork" and e.payload.get("role") == "child"),
        None,
    )
    parent_id = fork.payload.get("parent_session") if fork is not None else None
    if fork is None or not isinstance(parent_id, str):
        return {}
    lineage: dict[str, Any] = {
        "parent_session": parent_id,
        "forked_from": {
            "session": parent_id,
            "checkpoint": fork.payload.get("checkpoint"),
            "label": fork.payload.get("label"),
            "head": fork.payload.get("head"),
            "at": fork.ts,
        },
    }
    parent_log = session.dir.parent / parent_id / "events.jsonl"
    started = payloads_of(parent_log, "attempts_started") if parent_log.is_file() else []
    for payload in started:
        made = [str(a) for a in payload.get("attempts") or []]
        if session.id in made:
            lineage["kind"] = ATTEMPT_KIND
            lineage["attempt"] = {
                "parent": parent_id,
                "task_id": payload.get("task_id"),
                "checkpoint": payload.get("checkpoint"),
                "number": made.index(session.id) + 1,
                "of": len(made),
            }
    return lineage


def _reattach(session: Session, source: Path | None) -> str:
    assert source is not None
    new = source.expanduser().resolve()
    if session.workspace_dir.is_dir():
        git.git("worktree", "repair", str(session.workspace_dir), cwd=new)
    session.update_checkpoint(source=str(new))
    return f"re-attached the session to {new}"


def _restart_log(session: Session, source: Path | None) -> str:
    checkpoints = checkpoints_of(session)
    log = EventLog(session.events.path)
    # A new log starts its seq over: count it as a cut before its first line is written.
    raise_epoch(session.dir, f"repair-{utc_now()}")
    session.events.path.touch()
    repo = source_of(session, source)
    if is_chat_record(session):
        directory = str(chat_directory_of(session))
        log.append("session_start", {"kind": CHAT_KIND, "workspace": directory, "phase": "repair"})
        log.append("events_restored", {"reason": "events.jsonl was missing"})
        return "started a new events.jsonl (the earlier history is lost)"
    log.append("session_start", {"source": str(repo), "phase": "repair"})
    seed = next((cp for cp in checkpoints if cp.kind == "seed"), None)
    sha = seed_sha(session, repo if is_repo(repo) else None)
    if sha is not None:
        tokens = int(seed.state.get("tokens_used") or 0) if seed is not None else 0
        log.append("session_prepared", {"tokens_used": tokens, "restored": True})
        log.append("seed_committed", {"sha": sha, "branch": session.branch})
    log.append(
        "events_restored",
        {"reason": "events.jsonl was missing", "checkpoints": len(checkpoints)},
    )
    return "started a new events.jsonl (the earlier history is lost)"


def _valid_prd_copies(session: Session) -> list[Any]:
    """The checkpoints whose copy of ``prd.json`` keeps the seed rules, oldest first."""
    return [
        cp
        for cp in checkpoints_of(session)
        if prd_problem(cp.state.get("prd"), seed_rules=True) is None
    ]


def _restore_prd(session: Session, source: Path | None) -> str:
    latest = _valid_prd_copies(session)[-1]
    session.save_prd(replay_statuses(session, latest.state["prd"], latest.event_seq))
    if session.events.path.exists():
        session.log("prd_restored", checkpoint=latest.id)
    return f"restored prd.json from {latest.id}"


def _repoint_branch(session: Session, source: Path | None) -> str:
    repo = source_of(session, source)
    assert repo is not None
    found = last_recorded_commit(session, repo)
    assert found is not None
    git.git("branch", session.branch, found[0], cwd=repo)
    if session.events.path.exists():
        session.log("branch_restored", branch=session.branch, sha=found[0])
    return f"re-pointed {session.branch} at {found[0][:12]}"


def _recreate_worktree(session: Session, source: Path | None) -> str:
    repo = source_of(session, source)
    assert repo is not None
    worktree = git_worktrees.ensure_worktree(repo, session.workspace_dir, session.branch)
    session.update_checkpoint(workspace=str(worktree), branch=session.branch)
    return f"re-created the worktree at {worktree}"


def _check_out_branch(session: Session, source: Path | None) -> str:
    worktree = session.workspace_dir
    tip, head = git.rev_parse(session.branch, worktree), git.head(worktree)
    if tip is not None and tip != head and git.is_ancestor(tip, head, worktree):
        git.git("checkout", "-q", "-B", session.branch, cwd=worktree)
    else:
        git.git("checkout", "-q", session.branch, cwd=worktree)
    return f"checked out {session.branch} in the worktree"


_REPAIRS: dict[str, Callable[[Session, Path | None], str]] = {
    "journal": close_journal,
    "checkpoint": _rebuild_checkpoint,
    "source": _reattach,
    "events": _restart_log,
    "prd": _restore_prd,
    "branch": _repoint_branch,
    "worktree": _recreate_worktree,
    "head": _check_out_branch,
    **RECORD_REPAIRS,
}
