"""A code-only rewind never leaves a done task without its code.

``--scope code`` keeps the harness state, but when the commits it drops carry a
task's stages, that state would lie: a task marked ``done`` whose code is gone,
and ``resume`` saying there is nothing to do. So the plan also winds those tasks
back, keeping only the stages whose commits survive: a task with none left
returns to ``pending`` (its task state cleared), one with some to ``in_progress``
from its first lost stage. The plan says so, and ``resume`` re-runs them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilth import git
from tilth.session.harness_state import HarnessState
from tilth.session.store import Session
from tilth.timeline.record.state_capture import read_harness_state
from tilth.timeline.rewind.change_report import thread_drops


def _kept(sha: object, head: str, worktree: Path) -> bool:
    return isinstance(sha, str) and bool(sha) and git.is_ancestor(sha, head, worktree)


def code_consistent_state(
    state: HarnessState, head: str, worktree: Path
) -> tuple[HarnessState, list[str], dict[str, list[str]]]:
    """``state`` with every task whose stage commits ``head`` drops wound back; why; and
    each wound-back task's surviving stages."""
    tasks: dict[str, Any] = copy.deepcopy(dict(state.tasks))
    statuses: dict[str, str] = {}
    survivors: dict[str, list[str]] = {}
    lines: list[str] = []
    for task_id, record in list(tasks.items()):
        if not isinstance(record, dict):
            continue
        commits: dict[str, Any] = record.get("stage_commits") or {}
        lost = [stage for stage, sha in commits.items() if not _kept(sha, head, worktree)]
        base = record.get("base_commit")
        if not lost and (base is None or _kept(base, head, worktree)):
            continue
        kept = [s for s in record.get("stages_done") or [] if s in commits and s not in lost]
        survivors[task_id] = kept if _kept(base, head, worktree) else []
        if not kept or not _kept(base, head, worktree):
            del tasks[task_id]  # never started, as far as the code knows
            statuses[task_id] = "pending"
        else:
            record["stages_done"] = kept
            record["stage_commits"] = {s: commits[s] for s in kept}
            record["outputs"] = {
                k: v for k, v in (record.get("outputs") or {}).items() if k in kept
            }
            record["current_stage"] = None
            statuses[task_id] = "in_progress"
        shown = ", ".join(lost) if lost else "its start"
        lines.append(
            f"{task_id}: the commits of {shown} are dropped, so it goes back to "
            f"{statuses[task_id]} (`tilth resume` re-runs "
            + ("it)" if statuses[task_id] == "pending" else f"it from {lost[0]})")
        )
    if not statuses:
        return state, lines, survivors
    state = state.with_tasks(tasks)
    if state.prd is not None:
        state = state.with_prd(
            tuple(
                task.with_status(statuses[task.id])
                if task.id in statuses and task.status in ("done", "in_progress", "failed")
                else task
                for task in state.prd
            )
        )
    if state.status == "all_done":
        state = state.with_status("running")
    return state, lines, survivors


def _worker_threads_kept(heads: dict[str, str | None], survivors: dict[str, list[str]]) -> Any:
    """The thread heads minus the worker threads of the stages that will run again."""
    kept = {}
    for key, head in heads.items():
        parts = key.split(".")
        if len(parts) == 3 and parts[0] == "worker" and parts[1] in survivors:
            if parts[2] not in survivors[parts[1]]:
                continue
        kept[key] = head
    return kept


@dataclass
class WindBack:
    """What a code-only rewind changes besides the code: the wound-back state, the worker
    threads of the stages that run again (None: threads kept), and the report lines."""

    state: HarnessState
    threads: dict[str, str | None] | None
    messages_dropped: dict[str, int] = field(default_factory=dict)
    threads_deleted: list[str] = field(default_factory=list)
    task_changes: list[tuple[str, str, str]] = field(default_factory=list)
    details: list[str] = field(default_factory=list)


def wind_back_tasks(session: Session, head: str, worktree: Path) -> WindBack | None:
    """For ``--scope code``: the tasks whose code ``head`` drops, wound back (see module);
    None when no task loses code.

    The worker threads of the stages that run again go too: they describe code that no
    longer exists, and a fresh attempt starts from the task's brief.
    """
    now = read_harness_state(session)
    state, lines, survivors = code_consistent_state(now, head, worktree)
    if not lines:
        return None
    heads = session.threads.heads()
    threads = _worker_threads_kept(heads, survivors)
    wound = WindBack(state, threads if threads != heads else None, details=lines)
    if wound.threads is not None:
        wound.messages_dropped, wound.threads_deleted = thread_drops(
            session.threads.directory, threads
        )
    before, after = now.task_statuses(), state.task_statuses()
    wound.task_changes = [
        (tid, before.get(tid, "-"), new) for tid, new in after.items() if before.get(tid) != new
    ]
    return wound
