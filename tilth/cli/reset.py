"""``tilth reset``: delete a session entirely, or rewind it to its seed."""

from __future__ import annotations

import click

from tilth.cli.common import io, pick_session, session_id_argument, settings, yes_option
from tilth.errors import SessionCorrupt
from tilth.session.teardown import recorded_source, teardown


@click.command()
@session_id_argument
@yes_option
@click.option(
    "--to-seed",
    is_flag=True,
    help="Contributor tooling: rewind to the instant the seed was written instead of deleting.",
)
def reset(session_id: str | None, assume_yes: bool, to_seed: bool) -> None:
    """Delete a session: its worktree, its branch session/<id> and its directory.

    Without SESSION_ID the latest session is used (and named before anything
    happens). Asks [y/N] first; -y skips the question. Without a terminal,
    -y is required.
    """
    cfg = settings()
    out = io()
    if to_seed:
        from tilth.timeline.seed_reset import reset_to_seed_command, resolve_for_seed_reset

        reset_to_seed_command(
            resolve_for_seed_reset(cfg, session_id, out), out, assume_yes=assume_yes
        )
        return
    session = pick_session(cfg, session_id, out, "reset")
    with session.lock():
        try:
            session.checkpoint()
        except SessionCorrupt as exc:
            # Reset exists to get rid of broken sessions, so a bad checkpoint only warns.
            out.warn(f"{exc}; using the workspace recorded in events.jsonl")
        source = recorded_source(session)
        workspace = str(source) if source else "unknown workspace"
        out.say(f"reset session {session.id}")
        out.say(f"  workspace  {source or '(unknown: only the session dir will be removed)'}")
        out.say(f"  worktree   {session.workspace_dir}")
        out.say(f"  branch     {session.branch}")
        out.confirm(
            f"Delete session {session.id} of {workspace} (worktree, branch {session.branch} "
            "and session dir)?",
            assume_yes=assume_yes,
            command=f"tilth reset {session.id} -y",
        )
        notes = teardown(session)
    for note in notes:
        out.dim(f"  {note}")
    out.ok("reset complete")
