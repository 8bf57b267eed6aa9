"""``tilth doctor``: checks before a run; ``tilth doctor <id> [--repair]`` mends a session.

This build handles the session mode only (the environment checks of SPEC §5.4 are
added beside it); the session mode is ``tilth.cli.repair.session_doctor``.
"""

from __future__ import annotations

from pathlib import Path

import click

from tilth.cli.common import io, pick_session, settings
from tilth.errors import UsageError
from tilth.session.store import is_session_id


@click.command()
@click.argument("target", required=False, metavar="[SESSION_ID]")
@click.option("--repair", is_flag=True, help="Repair what can be repaired, each step confirmed.")
@click.option(
    "--source",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where the session's source repository is now (after moving it).",
)
@click.option("-y", "--yes", "assume_yes", is_flag=True, help="Do not ask to confirm repairs.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def doctor(
    target: str | None, repair: bool, source: Path | None, assume_yes: bool, as_json: bool
) -> int:
    """Diagnose a damaged session (the latest one without SESSION_ID); --repair fixes it.

    \b
    Repairs use only what Tilth recorded: a lost branch is re-pointed at the last
    recorded commit, prd.json and checkpoint.json come back from the latest
    checkpoint, a deleted worktree is re-created, a moved source repository is
    re-attached (--source PATH). Each step is shown and confirmed [y/N]; -y skips
    the question. Exit 0: nothing wrong (any more); 1: a problem remains.
    """
    if target is not None and not is_session_id(target):
        raise UsageError(
            f"{target!r} is not a session id",
            hint="`tilth sessions` lists them; `tilth doctor <id> --repair` mends one",
        )
    cfg = settings()
    out = io()
    session = pick_session(cfg, target, out, "doctor")
    from tilth.cli.repair import session_doctor

    return session_doctor(
        session, repair=repair, source=source, yes=assume_yes, as_json=as_json, out=out
    )
