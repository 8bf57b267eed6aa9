"""What ``run`` and ``resume`` check in ``prd.json`` before the first model call (SPEC §5.2).

The seed rules (required keys, safe and unique ids, acceptance criteria), a known status
for every task, and a seed test in the seed commit for every task not yet done: a task
list that breaks one is refused with a one-line error naming the entry (exit 2), so a
hand-edited ``[]`` never ends ``all_done`` and a task without a test never runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tilth import git
from tilth.agent.gate.seed_copies import slug_of
from tilth.agent.run_context import seed_commit
from tilth.errors import SessionCorrupt
from tilth.session.files import read_json
from tilth.session.store import Session
from tilth.session.validate import InvalidPrd, prd_problem


def check_prd_before_run(session: Session, worktree: Path) -> list[dict[str, Any]]:
    """The task list when it can be run; raises ``InvalidPrd`` naming what is wrong."""
    hint = f"`tilth doctor {session.id}` shows the problem and offers the repair"
    try:
        data = read_json(session.prd_path, what="prd.json")
    except FileNotFoundError:
        raise InvalidPrd(f"session {session.id} has no prd.json", hint=hint) from None
    except SessionCorrupt as exc:
        raise InvalidPrd(exc.message, hint=hint) from None
    problem = prd_problem(data, seed_rules=True)
    if problem is not None:
        raise InvalidPrd(f"prd.json of session {session.id}: {problem}", hint=hint)
    sha = seed_commit(session)
    if sha is None:
        return list(data)
    listed = git.git("ls-tree", "--name-only", sha, "tests/", cwd=worktree).splitlines()
    for entry in data:
        if entry.get("status") == "done":
            continue
        prefix = f"tests/test_{slug_of(entry['id'])}_"
        if not any(name.startswith(prefix) and name.endswith(".py") for name in listed):
            raise InvalidPrd(
                f"prd.json of session {session.id}: task {entry['id']} has no seed test "
                f"({prefix}<slug>.py) in the seed commit {sha[:12]}",
                hint=hint,
            )
    return list(data)
