"""``tilth prep-feature``: interview the user and write a seed for a workspace."""

from __future__ import annotations

import shlex
import signal
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import click

from tilth.cli.common import io, settings, workspace_argument
from tilth.cli.workspace import ensure_repository, has_uncommitted_changes
from tilth.config import Settings
from tilth.errors import UsageError
from tilth.library import sessions_of
from tilth.stops import ALL_STOPS
from tilth.ui import pickers
from tilth.ui.io import IO

if TYPE_CHECKING:
    from tilth import Session
    from tilth.seed import TerminalFrontend


@click.command("prep-feature")
@workspace_argument
@click.option("--brief", default=None, metavar="TEXT", help="The feature or refactor, in a line.")
@click.option(
    "--force", is_flag=True, help="Discard this workspace's prepared/running/failed sessions first."
)
@click.option(
    "--keep-existing", is_flag=True, help="Start a new session alongside the existing ones."
)
@click.option(
    "--answers",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    metavar="FILE",
    help="Answer the interview from FILE, one answer per line, in order (for CI).",
)
def prep_feature(
    workspace: Path, brief: str | None, force: bool, keep_existing: bool, answers: Path | None
) -> int:
    """Interview the user about a feature and write a seed: tasks plus acceptance tests.

    The prep model reads the repository and asks you questions, one at a time;
    then it writes the task list (prd.json) and acceptance test files (one or more per
    task). The seed is committed on a new branch session/<id> in its own worktree;
    the workspace's working tree is never touched. Without a terminal, answers
    are read from stdin one per line (or from --answers FILE). Next: tilth run.

    \b
    Examples:
      tilth prep-feature ~/code/myrepo --brief "add a CSV exporter"
      tilth prep-feature . --brief "..." --answers answers.txt --force   (CI)
    """
    if force and keep_existing:
        raise UsageError("--force and --keep-existing are mutually exclusive")
    out = io()
    cfg = settings()
    source = ensure_repository(workspace)
    from tilth.seed import load_answers

    answer_lines = load_answers(answers) if answers is not None else None
    endpoint = cfg.endpoint("prep")  # a missing setting fails here, before anything is created
    handed_over = _existing_sessions(out, cfg, source, brief, force=force, keep=keep_existing)
    if handed_over is not None:
        return handed_over
    text = _brief(out, brief)
    if has_uncommitted_changes(source):
        out.warn(
            "the workspace has uncommitted changes: the interview can read them, but the "
            "session's worktree starts from the last commit"
        )

    from tilth.library import interview
    from tilth.model import model_for
    from tilth.seed import TerminalFrontend

    def on_notice(kind: str, text: str) -> None:
        out.warn(f"prep model: {text}")

    def on_started(session: Session, worktree: Path) -> None:
        out.say(f"session  {session.id}")
        out.say(f"branch   {session.branch}")
        out.say(f"model    {endpoint.model}")
        if not out.stdout.isatty():
            out.dim("waiting for the prep model: a line follows each of its replies")

    frontend = TerminalFrontend(out, answer_lines, source=str(answers))
    with _interrupted_once(), _live_count_cleared(frontend):
        prepared = interview(
            cfg,
            source,
            text,
            model_for(cfg, "prep"),
            frontend,
            on_started=on_started,
            on_progress=out.dim,
            on_notice=on_notice,
        )
    if prepared.checkpoint_note:
        out.warn(prepared.checkpoint_note)
    for note in prepared.notes:
        out.warn(note)
    out.dim(f"seed commit {prepared.sha[:12]}")
    out.ok(f"prepared {prepared.session.dir}/")
    out.say(f"→ next: tilth run {shlex.quote(str(source))}")
    return 0


@contextmanager
def _interrupted_once() -> Iterator[None]:
    """Ctrl-C, SIGTERM (a cancelled CI job, ``kill``) and SIGHUP (the terminal closed)
    stop the prep once.

    The first raises ``KeyboardInterrupt``, so the session is closed out (marked failed,
    its ``stop`` logged, its lock released) and the user told how to discard it. Another
    within ``REPEAT_SECONDS`` — a second press, ``timeout`` forwarding its group's signal —
    is ignored: raised in the middle of the closing-out it would leave the session
    half-recorded and hide the hint. One later than that raises again, so a prep that does
    not stop can still be stopped. After an interrupt the three signals stay ignored once this
    block is left, as the process is on its way out (Python's own handler, which it puts
    back while it shuts down, would end it by the signal instead of exit code 130).
    """
    first: list[float] = []

    def interrupt(signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if first and now - first[0] < REPEAT_SECONDS:
            return
        first[:] = [now]
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in ALL_STOPS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_IGN if first else handler)


REPEAT_SECONDS = 10.0
"""How long after a first interrupt another is taken as the same one, repeated."""


@contextmanager
def _live_count_cleared(frontend: TerminalFrontend) -> Iterator[None]:
    """An error mid-reply must not be printed after a half-drawn live count."""
    try:
        yield
    finally:
        frontend.clear_live()


def _brief(out: IO, brief: str | None) -> str:
    """The brief from ``--brief``, else one line from the terminal or stdin."""
    if brief is None:
        if out.interactive:
            out.say("Describe the feature or refactor (one line):")
        line = out.readline("> ")
        if line is None:
            raise UsageError("no brief given", hint="pass --brief TEXT")
        brief = line
    if not brief.strip():
        raise UsageError("the brief is empty", hint="pass --brief TEXT describing the feature")
    return brief.strip()


def _existing_sessions(
    out: IO, cfg: Settings, source: Path, brief: str | None, *, force: bool, keep: bool
) -> int | None:
    """Deal with sessions already in flight; an exit code when the prep should not go on."""
    found = sessions_of(source, statuses=pickers.BLOCKING_STATUSES, settings=cfg)
    blockers = [session for session in found if pickers.in_flight(session)]
    if not blockers:
        return None
    for session in blockers:
        _roll_back_torn_seed(session)
    if keep:
        out.dim(f"prepping alongside {len(blockers)} existing session(s)")
        return None
    if force:
        out.dim(f"--force: discarding {len(blockers)} session(s)")
        _discard(out, blockers)
        return None
    if not out.interactive:
        out.say(f"cannot prep: this workspace already has {len(blockers)} session(s) in flight:")
        pickers.print_rows(out, blockers)
        command = ["tilth", "prep-feature", str(source)]
        if brief is not None:
            command += ["--brief", brief]
        shown = " ".join(shlex.quote(part) for part in command)
        raise UsageError(
            "stdin is not a terminal, so there is no one to ask what to do with them",
            hint=f"discard them and prep: `{shown} --force`; "
            f"or keep them and prep alongside: `{shown} --keep-existing`",
        )
    action = pickers.choose_for_existing(out, blockers)
    if action == pickers.CANCEL:
        out.say("cancelled")
        return 0
    if action == pickers.RUN:
        return _hand_over(out, ["run", str(source)])
    if action == pickers.RESUME:
        return _hand_over(out, ["resume", blockers[0].id])
    if action == pickers.DISCARD:
        confirm_discard(out, blockers)
        _discard(out, blockers)
    return None


def confirm_discard(out: IO, sessions: list[Session]) -> None:
    """The ``[y/N]`` every destructive choice asks; declining changes nothing (exit 1)."""
    names = ", ".join(s.id for s in sessions)
    out.say(
        f"Discarding deletes the branch, the worktree and the session directory of {names}; "
        "this cannot be undone."
    )
    plural = "these sessions" if len(sessions) > 1 else "this session"
    out.confirm(f"Discard {plural}?")


def _roll_back_torn_seed(session: Session) -> None:
    """Undo a seed write a crash left half done, unless the session is in use."""
    from tilth.errors import SessionLocked
    from tilth.seed import recover

    try:
        with session.lock():
            recover(session.dir)
    except SessionLocked:
        pass


def _discard(out: IO, blockers: list[Session]) -> None:
    """Tear every blocking session down (worktree, branch, directory).

    Every lock is taken first, so a session in use refuses the whole discard before any
    session is deleted.
    """
    from tilth.library import delete_session

    with ExitStack() as locks:
        for session in blockers:
            locks.enter_context(session.lock())
        for session in blockers:
            notes = delete_session(session)
            out.dim(f"discarded {session.id}")
            for note in notes:
                out.dim(f"  {note}")


def _hand_over(out: IO, argv: list[str]) -> int:
    """Run another verb in this process, or name it when it is not available."""
    from tilth.cli import VERBS, _available, main

    if _available(VERBS[argv[0]][0]):
        return main(argv)
    command = " ".join(shlex.quote(part) for part in ["tilth", *argv])
    out.say(f"to continue, run: {command}")
    return 0
