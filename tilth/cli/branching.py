"""``tilth fork`` and ``tilth summarize``: new branches of a timeline, and shorter threads."""

from __future__ import annotations

import click

from tilth.cli.common import io, pick_session, session_id_argument, settings

at_option = click.option(
    "--at",
    "at_ref",
    default=None,
    metavar="CHECKPOINT",
    help="cp-0007, 7, seed, latest, T-001 (task start) or T-001/planning (stage).",
)


@click.command()
@session_id_argument
@at_option
@click.option("--json", "as_json", is_flag=True, help="Print the new session as JSON.")
@click.option("--dry-run", is_flag=True, help="Print what the fork would make and change nothing.")
def fork(session_id: str | None, at_ref: str | None, as_json: bool, dry_run: bool) -> None:
    """Start a new session whose code, conversation and state equal a checkpoint.

    The original session is left as it is; the fork gets its own id, branch
    (session/<new id>) and worktree (a chat's fork: a directory of its own).
    TILTH_SETUP_COMMAND runs in the new worktree.

    \b
    Example:
      tilth fork --at T-002/planning      then: tilth resume <new id>
    """
    from tilth import TimelineController
    from tilth.errors import UsageError

    cfg = settings()
    out = io()
    parent = pick_session(cfg, session_id, out, "fork")
    timeline = TimelineController(parent, cfg)
    with timeline.writing(out.warn):
        if not at_ref:
            raise UsageError(
                "say where to fork from with --at <checkpoint>",
                hint=f"`tilth checkpoints {parent.id}` lists them",
            )
        target = timeline.resolve(at_ref)
        if dry_run:
            # The id this plan reserves dies with it: show where it goes, not a made-up one.
            plan = timeline.plan_fork(target).preview()
            if as_json:
                out.print_json(plan.to_dict())
            else:
                out.say(plan.render())
                out.dim("dry run: nothing was changed")
            return
        result = timeline.fork(target, on_progress=out.note)
    child = result.session
    from tilth.chat import is_chat

    chat = is_chat(child)  # a chat's fork is a directory of its own: no branch, no run
    branch = None if chat else child.branch

    for note in result.notes:
        out.warn(note)
    if as_json:
        out.print_json(
            {
                "session_id": child.id,
                "parent_session": parent.id,
                "checkpoint": target.id,
                "branch": branch,
                "workspace": str(result.worktree),
            }
        )
        return
    out.ok(f"forked session {parent.id} at {target.id} ({target.label}) into {child.id}")
    if chat:
        out.say(f"directory {result.worktree}")
        out.say(f"continue it with: tilth chat --resume {child.id}")
        return
    out.say(f"branch {child.branch}, worktree {result.worktree}")
    out.say(f"continue it with: tilth resume {child.id}")


@click.command()
@session_id_argument
@at_option
@click.option(
    "--direction",
    type=click.Choice(("from", "up-to")),
    required=True,
    help="up-to: summarize the thread up to the checkpoint; from: after it.",
)
@click.option("--thread", "thread_key", default=None, help="Which thread (when there are several).")
@click.option(
    "--dry-run", is_flag=True, help="Say what would be summarized; no model call, no change."
)
def summarize(
    session_id: str | None,
    at_ref: str | None,
    direction: str,
    thread_key: str | None,
    dry_run: bool,
) -> None:
    """Replace part of a thread with a model-written summary (checkpoints keep working).

    A thread is one conversation of the session, such as worker.T-001.implementing
    or evaluator.T-001.code_review.1 (a chat has one, chat). The checkpoint's last
    message in that thread is the boundary: up-to replaces the messages up to it
    (a leading system prompt is kept), from replaces those after it. The summary
    is written by the worker's model. A later rewind to a point inside the
    summarized part brings the original messages back.

    \b
    Example:
      tilth summarize --at cp-0013 --direction up-to --thread worker.T-001.implementing
    """
    from tilth import TimelineController
    from tilth.errors import UsageError
    from tilth.model import model_for

    cfg = settings()
    out = io()
    session = pick_session(cfg, session_id, out, "summarize")
    if not at_ref:
        raise UsageError(
            "say where with --at <checkpoint>",
            hint=f"`tilth checkpoints {session.id}` lists them",
        )
    timeline = TimelineController(session, cfg)
    if dry_run:
        target = timeline.resolve(at_ref)
        out.say(timeline.plan_summary(target, direction, thread_key=thread_key).render())
        out.dim("dry run: nothing was changed")
        return
    model = model_for(cfg, "worker")
    with timeline.writing(out.warn):
        target = timeline.resolve(at_ref)
        result = timeline.summarize(target, direction, model, thread_key=thread_key)
    out.ok(
        f"summarized {len(result.replaced)} message(s) {direction} {target.id} "
        f"in thread {result.thread} into {result.summary.id}"
    )
