"""Session pickers: what to do when a workspace already has sessions in flight.

Shared by ``prep-feature`` (a session exists: run/resume it, discard it, start
alongside, cancel) and ``run`` (no prepared session: resume a prior one, discard
it, prep one now, cancel). Each picker returns an action constant; the caller
acts on it. They never touch a session themselves. Only a session whose seed
was committed is offered to run or resume: a prep that failed or was
interrupted has nothing to run.
"""

from __future__ import annotations

from pathlib import Path

from tilth import Session
from tilth.errors import SessionCorrupt
from tilth.session import read_json, read_seed_meta, state_of
from tilth.ui.io import IO

BLOCKING_STATUSES = ("prepared", "running", "failed")

RUN = "run"
RESUME = "resume"
DISCARD = "discard"
ALONGSIDE = "alongside"
PREP_NOW = "prep_now"
CANCEL = "cancel"

LABEL_CHARS = 60


def _status(session: Session) -> str:
    """What the session is doing now: ``running`` only with a live owner (``state_of``)."""
    state = state_of(session)
    return "(unknown)" if state == "unreadable" else state


def in_flight(session: Session) -> bool:
    """False for a record of a prep that never got going (no seed, worktree taken back)."""
    return is_seeded(session) or session.workspace_dir.exists()


def is_seeded(session: Session) -> bool:
    """True when the session has a task list and a committed seed (so it can run)."""
    if not session.prd_path.is_file():
        return False
    try:
        return session.events.last("seed_committed") is not None
    except OSError:
        return False


def session_label(session: Session, max_chars: int = LABEL_CHARS) -> str:
    """A short description: the tl;dr's first line, else the first task; never raises."""
    label = _label_from_meta(session.seed_meta_path) or _label_from_prd(session.prd_path)
    if len(label) > max_chars:
        label = label[: max_chars - 1].rstrip() + "…"
    return label


def _label_from_meta(path: Path) -> str:
    try:
        tldr = read_seed_meta(path).get("tldr")
    except OSError:
        return ""
    if not isinstance(tldr, str):
        return ""
    for line in tldr.splitlines():
        line = line.strip()
        if line:
            line = line[2:].strip() if line[:2] in ("- ", "* ") else line
            # Bold markers read as noise in a terminal row.
            return line.replace("**", "").replace("__", "")
    return ""


def _label_from_prd(path: Path) -> str:
    try:
        tasks = read_json(path, what="prd.json")
    except (OSError, SessionCorrupt):
        return ""
    if not isinstance(tasks, list) or not tasks or not isinstance(tasks[0], dict):
        return ""
    first = tasks[0]
    parts = [str(first[key]) for key in ("id", "title") if first.get(key)]
    return ": ".join(parts)


def session_row(session: Session) -> str:
    """``sessions/<id>/  <status>  <label>``, flagging a prep that never finished."""
    label = session_label(session)
    if not is_seeded(session):
        label = "(prep did not finish: nothing to run)"
    row = f"sessions/{session.id}/  {_status(session):>9}"
    return f"{row}  {label}" if label else row


def print_rows(io: IO, sessions: list[Session]) -> None:
    for session in sessions:
        io.say(f"  {session_row(session)}")


def choose_for_existing(io: IO, blockers: list[Session]) -> str:
    """``prep-feature``'s picker: ``RUN``, ``RESUME``, ``DISCARD``, ``ALONGSIDE`` or ``CANCEL``."""
    alongside = (ALONGSIDE, "start a new session (don't touch any existing sessions)")
    if len(blockers) == 1:
        session = blockers[0]
        io.say("This workspace already has a session in flight:")
        print_rows(io, blockers)
        options: list[tuple[str, str]] = []
        if is_seeded(session):
            if _status(session) == "prepared":
                options.append((RUN, "run it now"))
            else:
                options.append((RESUME, "resume it"))
        options += [(DISCARD, "discard it and start a new prep"), alongside]
        return io.choose("What would you like to do?", options)
    io.say(f"This workspace has {len(blockers)} sessions in flight:")
    print_rows(io, blockers)
    io.dim(
        "Heads up: `tilth run` needs exactly one prepared session per workspace; "
        "discard the ones you do not want."
    )
    return io.choose(
        "What would you like to do?",
        [(DISCARD, f"discard all {len(blockers)} and start a new prep"), alongside],
    )


def choose_without_prepared(io: IO, prior: Session | None) -> str:
    """``run``'s picker when nothing is prepared: ``RESUME``, ``DISCARD``, ``PREP_NOW``, ``CANCEL``.

    ``prior`` is the newest earlier session of the workspace, if any; it is offered
    for resuming only when its seed was committed.
    """
    if prior is None:
        return io.choose(
            "No prepared session for this workspace, and no prior session to resume.",
            [(PREP_NOW, "prep one now (a short interview that writes the tasks and their tests)")],
        )
    if not is_seeded(prior):
        io.say("No prepared session for this workspace; the prior one never finished its prep:")
        print_rows(io, [prior])
        return io.choose(
            "What would you like to do?",
            [(DISCARD, "discard it and prep a new one"), (PREP_NOW, "prep a new one alongside")],
        )
    io.say("No prepared session for this workspace, but a prior session is resumable:")
    row = session_row(prior)
    last = prior.last_stop()
    io.say(f"  {row}  [last stop: {last}]" if last else f"  {row}")
    return io.choose(
        "What would you like to do?",
        [(RESUME, "resume that session"), (DISCARD, "discard it and prep a new one")],
    )
