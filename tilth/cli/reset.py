"""``tilth reset``: delete a session entirely, or rewind it to its seed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from tilth import TimelineController
from tilth.cli.common import (
    io,
    pick_session,
    refuse_chat,
    session_id_argument,
    settings,
    yes_option,
)
from tilth.config import Settings
from tilth.errors import SessionCorrupt, SessionNotFound
from tilth.library import (
    attempts_made,
    delete_session,
    is_chat,
    open_session,
    seed_reset_warning,
    session_source,
    source_hint,
)
from tilth.ui.io import IO

if TYPE_CHECKING:
    from tilth import Session


@click.command()
@session_id_argument
@yes_option
@click.option(
    "--to-seed",
    is_flag=True,
    help="Contributor tooling: rewind to the instant the seed was written instead of deleting.",
)
@click.option("--dry-run", is_flag=True, help="Print what would be deleted and change nothing.")
def reset(session_id: str | None, assume_yes: bool, to_seed: bool, dry_run: bool) -> None:
    """Delete a session: its worktree, its branch session/<id> and its directory.

    A restart's saved changes (refs/tilth/stash/<id>) go too. Nothing else of
    your repository is touched; merge the branch first if you want the work.
    This cannot be undone. Without SESSION_ID the latest session is used (and
    named before anything happens). Asks [y/N] first; -y skips the question.
    Without a terminal, -y is required.

    With --to-seed the session is kept and rewound to the instant its seed was
    written (every later commit, event and conversation deleted, not undoable),
    so `tilth run` can run the same seed again.
    """
    cfg = settings()
    out = io()
    if to_seed:
        reset_to_seed_command(
            resolve_for_seed_reset(cfg, session_id, out),
            out,
            assume_yes=assume_yes,
            dry_run=dry_run,
        )
        return
    session = pick_session(cfg, session_id, out, "reset")
    with session.lock():
        try:
            session.record()
        except SessionCorrupt as exc:
            # Reset exists to get rid of broken sessions, so a bad checkpoint only warns.
            out.warn(f"{exc}; using the workspace recorded in events.jsonl")
        source = session_source(session)
        workspace = str(source) if source else "unknown workspace"
        out.say(f"reset session {session.id}")
        if is_chat(session):
            # A chat has no worktree and no branch; its directory is the user's own.
            out.say(f"  directory  {source or '(unknown)'} (yours: it stays as it is)")
            question = f"Delete chat session {session.id} (its conversation and checkpoints)?"
        else:
            out.say(f"  workspace  {source or '(unknown: only the session dir will be removed)'}")
            out.say(f"  worktree   {session.workspace_dir}")
            out.say(f"  branch     {session.branch}")
            made = attempts_made(session)
            if made:
                out.say(f"  attempts   {len(made)} attempt session(s) it made go too")
            question = (
                f"Delete session {session.id} of {workspace} (worktree, branch {session.branch} "
                "and session dir)?"
            )
        if dry_run:
            out.dim("dry run: nothing was changed")
            return
        out.confirm(question, assume_yes=assume_yes, command=f"tilth reset {session.id} -y")
        notes = delete_session(session)
    for note in notes:
        out.dim(f"  {note}")
    out.ok("reset complete")


def resolve_for_seed_reset(settings: Settings, session_id: str | None, out: IO) -> Session:
    """The session to reset; a missing one gets the reset + prep-feature pointer."""
    try:
        session = open_session(session_id, settings, kind="run")
    except SessionNotFound as exc:
        # Nothing to act on: a usage error (exit 2) as for every verb, with this verb's pointer.
        raise SessionNotFound(
            f"cannot reset to seed: {exc}",
            hint="start a session with `tilth prep-feature <workspace>` "
            "(`tilth reset <id>` discards a broken one)",
        ) from None
    if session_id is None:
        out.note(f"reset: latest session is {session.id}")
    refuse_chat(session, "reset --to-seed")
    return session


def reset_to_seed_command(
    session: Session, out: IO, *, assume_yes: bool, dry_run: bool = False
) -> None:
    """The whole verb: lock, recover, pre-flight, show the plan, confirm, execute."""
    timeline = TimelineController(session)
    with timeline.writing(out.warn):
        plan = timeline.plan_reset_to_seed()
        out.say(plan.render())
        if dry_run:
            out.dim("dry run: nothing was changed")
            return
        out.say()
        out.say(seed_reset_warning(), style="bold red")
        out.confirm(
            f"Erase the run and reset session {session.id} to its seed?", assume_yes=assume_yes
        )
        timeline.execute(plan)
    source = source_hint(session)
    out.ok(f"session {session.id} is back at its seed (status prepared)")
    out.say(f"run it again with: tilth run {source}")
