"""``tilth reset --to-seed``: contributor tooling that erases a run back to its seed.

Rewinds the session to the instant ``prep-feature`` returned so the same seed
can be run again without a new interview. It is one more go-back operation on
the timeline engine (plan → confirm → journaled execute), with the pre-flight
checks and wording of the original proposal. Because ``events.jsonl`` must end
at ``seed_committed`` afterwards, the reset itself is recorded only in
``timeline/operations.jsonl``. Nothing else of the erased run stays: its threads'
id counters, its capture and code state, its checkpoints' id counter, its other
go-backs in the operations log and the ref its restarts stashed on all go
(docs/timeline.md lists the few files that record the reset itself).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilth import git
from tilth.errors import SessionCorrupt, TilthError
from tilth.session.events import iter_lines
from tilth.session.seed_rules import SeedRuleError, check_prd
from tilth.session.store import DERIVED_FILES, Session
from tilth.timeline.record.checkpoints import list_checkpoints
from tilth.timeline.rewind.plan import RewindPlan
from tilth.timeline.rewind.planner import plan
from tilth.timeline.rewind.targets import Target

CONFIRM_WARNING = (
    "This is destructive and irreversible. Everything the run did after the seed is "
    "deleted for good: its commits and code changes, its event log entries, ledgers, "
    "conversations and reports. There is no archive and no undo; the prior run's code "
    "and logs are unrecoverable."
)


class SeedResetError(TilthError):
    """A pre-flight check of ``reset --to-seed`` failed; nothing was changed."""


@dataclass(frozen=True)
class SeedAnchor:
    """Where the seed sits: its commit, and the end of its ``seed_committed`` line."""

    sha: str
    branch: str
    worktree: str
    end: int
    seq: int
    tokens_used: int


def _fail(session: Session, problem: str) -> SeedResetError:
    source = source_hint(session)
    return SeedResetError(
        f"cannot reset session {session.id} to its seed: {problem}; nothing was changed",
        hint=f"discard it with `tilth reset {session.id}` and seed again with "
        f"`tilth prep-feature {source}`",
    )


def source_hint(session: Session) -> str:
    try:
        return str(session.record().source or "<workspace>")
    except (SessionCorrupt, OSError):
        return "<workspace>"


def find_anchor(session: Session) -> tuple[dict[str, Any] | None, dict[str, Any] | None, int, int]:
    """The first ``seed_committed`` record, the ``session_prepared`` before it, end and seq.

    Stops at the seed: the scan covers the prep trail only, never the run.
    """
    prepared: dict[str, Any] | None = None
    for line, _, end, complete in iter_lines(session.events.path):
        if not complete:
            break
        if b'"session_prepared"' not in line and b'"seed_committed"' not in line:
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if not isinstance(record, dict):
            continue
        if record.get("type") == "session_prepared":
            prepared = record
        elif record.get("type") == "seed_committed":
            return record, prepared, end, int(record.get("seq") or 0)
    return None, prepared, 0, 0


def preflight(session: Session) -> SeedAnchor:
    """Every check of the proposal, in its order; raises ``SeedResetError`` on the first miss."""
    if not session.dir.is_dir():
        raise _fail(session, f"the session directory {session.dir} does not exist")
    try:
        cp = session.record()
    except SessionCorrupt as exc:
        raise _fail(session, str(exc)) from None
    seed, prepared, end, seq = find_anchor(session)
    payload = seed.get("payload") if seed else None
    if not isinstance(payload, dict) or not payload.get("sha") or not payload.get("branch"):
        raise _fail(
            session,
            "it has no seed_committed event with a sha and branch (prep-feature never "
            "finished), so there is no seed to return to",
        )
    prep_payload = prepared.get("payload") if prepared else None
    tokens = prep_payload.get("tokens_used") if isinstance(prep_payload, dict) else None
    if not isinstance(tokens, int) or isinstance(tokens, bool):
        raise _fail(session, "it has no session_prepared event carrying tokens_used")
    workspace = cp.workspace
    if not workspace:
        raise _fail(session, "the session has no worktree recorded in checkpoint.json")
    if not Path(str(workspace)).is_dir():
        raise _fail(session, f"its worktree {workspace} is gone")
    try:
        check_prd(session.load_prd())
    except (SeedRuleError, SessionCorrupt) as exc:
        raise _fail(session, f"prd.json fails the seed shape check ({exc})") from None
    sha = git.rev_parse(str(payload["sha"]), Path(str(workspace)))
    if sha is None:
        raise _fail(session, f"the seed commit {payload['sha']} no longer exists in the worktree")
    # A fork's log is copied from its parent, so its seed_committed names the parent's
    # branch; the branch this reset moves is the one checkpoint.json records.
    branch = str(cp.branch or payload["branch"])
    return SeedAnchor(sha, branch, str(workspace), end, seq, tokens)


def seed_target(session: Session, anchor: SeedAnchor) -> Target:
    """The seed as a target: everything after ``seed_committed`` goes (not undoable)."""
    seed_cp = next((c for c in list_checkpoints(session) if c.kind == "seed"), None)
    prd = [
        {**task, "status": "pending"} if isinstance(task, dict) else task
        for task in session.load_prd()
    ]
    if seed_cp is not None:
        heads = dict(seed_cp.threads)
    else:
        # Without a seed checkpoint, keep only the interview's own thread(s).
        heads = {k: v for k, v in session.threads.heads().items() if k.startswith("interview")}
    stash = git.stash_ref(session.id)
    stashed = git.ok("show-ref", "--verify", "--quiet", stash, cwd=Path(anchor.worktree))
    return Target(
        op="reset_to_seed",
        ref=seed_cp.id if seed_cp else "seed",
        label=f"seed {anchor.sha[:12]}",
        scope="both",
        headline=f"reset session {session.id} to its seed ({anchor.sha[:12]} on {anchor.branch})",
        head=anchor.sha,
        state={
            "prd": prd,
            "tasks": {},
            "ledger": {},
            "tokens_used": anchor.tokens_used,
            "status": "prepared",
        },
        threads=heads,
        event_offset=anchor.end,
        event_seq=anchor.seq,
        keep_through_seq=seed_cp.seq if seed_cp else 0,
        delete_paths=("ledger", "tasks", *DERIVED_FILES, *run_traces(session, set(heads))),
        undoable=False,
        details=(
            f"checkpoint.json: status -> prepared, tokens_used -> {anchor.tokens_used}",
            "events.jsonl: cut right after the seed_committed line",
            "kept: seed-meta.json, prd.json (every task back to pending), the seed commit",
            "also erased: checkpoints after the seed and their id counter, the run's "
            "go-backs in timeline/operations.jsonl",
            *([f"deleted: {stash} (what restarts stashed)"] if stashed else []),
        ),
    )


RUN_STATE = ("timeline/capture-state.json", "timeline/code-state.json")
"""Timeline files only a run or a go-back writes (prep writes neither)."""


def run_traces(session: Session, kept_threads: set[str]) -> list[str]:
    """Session files the erased run left besides its derived files: the id counters
    (``threads/<key>.next``) of threads the reset drops, and the run's timeline state."""
    counters = sorted(session.threads.directory.glob("*.next"))
    dropped = [p for p in counters if p.name.removesuffix(".next") not in kept_threads]
    return [f"threads/{p.name}" for p in dropped] + list(RUN_STATE)


def plan_reset_to_seed(session: Session, anchor: SeedAnchor) -> RewindPlan:
    """What the reset will change (pure)."""
    # Undo points after the seed go too: the reset is the one go-back that cannot be undone.
    return plan(session, seed_target(session, anchor))
