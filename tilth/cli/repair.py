"""``tilth doctor <id> [--repair]``: a damaged session diagnosed, and repaired step by step.

``tilth doctor`` (tilth/cli/doctor.py) calls ``session_doctor`` when its target is a
session or ``--repair`` is given. Parsing and printing only; the diagnosis and the
repairs are ``tilth.library.diagnose_session`` and ``repair_session``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from tilth.errors import Aborted, TilthError, UsageError
from tilth.library import diagnose_session, repair_session
from tilth.ui.io import IO

if TYPE_CHECKING:
    from tilth import Session
    from tilth.health import Problem


def session_doctor(
    session: Session,
    *,
    repair: bool,
    source: Path | None,
    yes: bool,
    as_json: bool,
    out: IO | TextIO,
) -> int:
    """Diagnose ``session`` (a table of problems and fixes); with ``repair``, fix them.

    ``out`` is the terminal object, or a stream to print to.

    Each repair is shown first and confirmed ``[y/N]`` (``yes`` skips the question;
    without a terminal and without ``yes`` it refuses). Exit 0 when nothing is left
    wrong, 1 when a problem remains.
    """
    term = out if isinstance(out, IO) else IO(stdout=out)
    if repair:
        _finish_interrupted(session, term)
    problems = diagnose_session(session, source)
    if not repair:
        return _report(session, problems, term, as_json)
    if not yes and not term.interactive and any(p.fix for p in problems):
        extra = f" --source {source}" if source else ""
        raise UsageError(
            "refusing to repair without confirmation: stdin is not a terminal",
            hint=f"to confirm non-interactively, run: tilth doctor {session.id} --repair{extra} -y",
        )
    done = _repair_all(session, source, term, yes=yes, quiet=as_json)
    left = diagnose_session(session, source)
    if as_json:
        term.print_json({"session": session.id, "repaired": done, "problems": _rows(left)})
        return 1 if left else 0
    if left:
        term.say("")
        _table(term, left)
        return 1
    term.ok(
        f"session {session.id} is whole again"
        if done
        else f"session {session.id}: no problems found"
    )
    return 0


def _finish_interrupted(session: Session, term: IO) -> None:
    """A go-back a crash interrupted (a rewind, a fork, a winner's graft, a pick) is finished
    first, as the next command on the session would; a torn journal is a repair below."""
    from tilth.library import open_timeline

    try:
        message = open_timeline(session).recover()
    except TilthError:
        return
    if message:
        term.warn(message)


def _repair_all(
    session: Session, source: Path | None, term: IO, *, yes: bool, quiet: bool
) -> list[str]:
    """Repair the first repairable problem, diagnose again, until none is left (or declined)."""
    done: list[str] = []
    declined: set[str] = set()
    with session.lock():
        while True:
            todo = [p for p in diagnose_session(session, source) if p.fix and p.key not in declined]
            if not todo:
                return done
            problem = todo[0]
            if not quiet:
                term.say(f"problem: {problem.what}")
                term.say(f"repair:  {problem.fix}")
            try:
                term.confirm("Apply this repair?", assume_yes=yes)
            except Aborted:
                declined.add(problem.key)
                term.say("skipped")
                continue
            try:
                result = repair_session(session, problem, source)
            except TilthError as exc:
                term.error(exc.message, hint=exc.hint)
                declined.add(problem.key)
                continue
            done.append(result)
            if not quiet:
                term.ok(f"done: {result}")


def _rows(problems: list[Problem]) -> list[dict[str, object]]:
    return [p.as_dict() for p in problems]


def _report(session: Session, problems: list[Problem], term: IO, as_json: bool) -> int:
    if as_json:
        term.print_json({"session": session.id, "problems": _rows(problems)})
        return 1 if problems else 0
    if not problems:
        term.ok(f"session {session.id}: no problems found")
        return 0
    _table(term, problems)
    if any(p.fix for p in problems):
        term.say(
            f"→ tilth doctor {session.id} --repair   (shows each step and asks first)", "yellow"
        )
    return 1


def _table(term: IO, problems: list[Problem]) -> None:
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("problem", overflow="fold")
    table.add_column("fix", overflow="fold")
    for p in problems:
        table.add_row(
            p.what, p.fix or f"cannot be repaired from the record: {p.hint or ''}".rstrip(": ")
        )
    term.table(table)
