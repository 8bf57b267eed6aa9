"""What a run hands to every task: the session, settings, models, recorder, progress."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tilth.agent.stops import StopRun
from tilth.config import Settings
from tilth.environment.project import ProjectEnv, resolve_project_env
from tilth.environment.worktree_env import trusted_worktree_env
from tilth.model.base import Delta, Model, OnDelta
from tilth.session.events import payloads_of
from tilth.session.store import Session
from tilth.session.task import Task
from tilth.tools.base import ToolObserver
from tilth.tools.sandbox import Sandbox


class CheckpointRecorder(Protocol):
    """Marks checkpoints as the run goes (``tilth.timeline.Recorder`` is the one in use)."""

    observer: ToolObserver | None
    """What the worker's tools report writes and shell commands to (turn capture)."""

    def task_start(self, task_id: str) -> object: ...

    def stage(self, task_id: str, stage: str) -> object: ...

    def turn(
        self, actor: str, *, task_id: str | None, stage: str | None, turn: int, label: str
    ) -> object: ...

    def stop(self, reason: str) -> object: ...

    def close(self) -> None: ...


class Progress(Protocol):
    """Live progress (task, stage, turn, tokens, streamed replies) plus notable lines.

    A note may quote a model (a task's title, a reviewer's concern): a sink that prints to
    a terminal neutralises control sequences, as ``tilth.ui.progress.TerminalProgress`` does.
    """

    def status(
        self,
        *,
        task: str | None = None,
        stage: str | None = None,
        turn: int | None = None,
        tokens: int | None = None,
    ) -> None: ...

    def note(self, text: str, style: str | None = None) -> None: ...

    def on_delta(self, delta: Delta) -> None: ...


class Notices(Protocol):
    """Where a run's lines for a person go (warnings, its header, the summary): the
    terminal's ``IO`` in the CLI, ``tilth.agent.progress_sinks.LineNotices`` elsewhere."""

    def say(self, text: str = "", style: str | None = None) -> None: ...

    def dim(self, text: str) -> None: ...

    def warn(self, text: str) -> None: ...

    def stdout_to_stderr(self) -> None: ...


def prep_tokens(session: Session) -> int:
    """``tokens_used`` recorded by ``session_prepared`` (0 when the session was never prepped)."""
    for payload in payloads_of(session.events.path, "session_prepared"):
        return int(payload.get("tokens_used") or 0)
    return 0


def seed_commit(session: Session) -> str | None:
    """The sha of the session's seed commit (its ``seed_committed`` event), or None."""
    for payload in payloads_of(session.events.path, "seed_committed"):
        sha = payload.get("sha")
        if isinstance(sha, str) and sha:
            return sha
    return None


@dataclass
class RunContext:
    """Everything the task pipeline needs; built once per ``run``/``resume``."""

    session: Session
    settings: Settings
    worktree: Path
    worker: Model
    evaluator: Model
    recorder: CheckpointRecorder
    progress: Progress
    scripted: bool = False
    started: float = 0.0
    """``time.monotonic()`` at the start of this invocation (wall-clock cap is per invocation)."""
    environment: ProjectEnv | None = None
    """The project's environment; resolved on first use when not given (``project_env``)."""
    on_delta: OnDelta | None = None
    """Told about each piece of a streamed reply (the live token count), when set."""
    sandbox: Sandbox | None = None
    """Where the worker's ``bash`` and the gate run confined (None: unsandboxed)."""
    task_runner: Callable[[RunContext, Task], Any] | None = None
    """Runs one task instead of its pipeline in place (attempts, ``tilth.attempts``)."""
    only_task: str | None = None
    """An attempt session's one task: the run stops once it is no longer open."""
    attempt_note: str | None = None
    """Told to the worker of an attempt ("attempt 2 of 3"), so attempts may differ."""
    shared_tokens: Callable[[], int] | None = None
    """Spend outside this session's own count that its token cap counts: an attempt's
    siblings' since their fork; a parent's attempts that a stop left undecided."""

    fork_tokens: int | None = None
    """An attempt's count when it was forked: its live figure is what it spent since."""

    _prep_tokens: int | None = field(default=None, init=False, repr=False)
    _seed_sha: str | None = field(default=None, init=False, repr=False)

    def seed_sha(self) -> str | None:
        """The seed commit, whose copies of the seed tests the gate runs."""
        if self._seed_sha is None:
            self._seed_sha = seed_commit(self.session)
        return self._seed_sha

    def project_env(self) -> ProjectEnv:
        """The environment seed tests, the linter and ``bash`` run in (resolved once)."""
        if self.environment is None:
            trusted = trusted_worktree_env(self.session, self.worktree)
            self.environment = resolve_project_env(
                self.worktree, self.session.source, self.settings, trusted=trusted
            )
        return self.environment

    def deadline(self) -> float | None:
        """The ``time.monotonic()`` instant the wall-clock cap ends (None: no cap)."""
        minutes = self.settings.max_wall_clock_minutes
        return self.started + minutes * 60 if minutes else None

    def notice(self, kind: str, text: str) -> None:
        """A turn's notice for the person (a retry, a cut-off reply, a summarized thread)."""
        self.progress.note(f"{text}", "yellow")

    def turn_options(self, model: Model, checkpoint: Any = None) -> dict[str, Any]:
        """What every actor of a run shares: notices, the wall-clock deadline, the context
        window kept (``checkpoint`` records one before a thread is summarized)."""
        from tilth.agent.context import ContextKeeper

        return {
            "on_notice": self.notice,
            "deadline": self.deadline(),
            "context": ContextKeeper.for_actor(model, self.settings, checkpoint),
            "max_reply_tokens": self.settings.max_reply_tokens,
            # An attempt's lane carries the run's Ctrl-C (its attempts run off the main thread,
            # where no KeyboardInterrupt reaches a model call in flight).
            "cancel": getattr(self.progress, "cancel_token", None),
        }

    def run_tokens(self) -> int:
        """Tokens spent by runs only: the interview's spend does not count toward the cap;
        an attempt's siblings' spend does (they share the session's caps)."""
        if self._prep_tokens is None:
            self._prep_tokens = prep_tokens(self.session)
        shared = self.shared_tokens() if self.shared_tokens is not None else 0
        return max(0, self.session.tokens_used - self._prep_tokens) + shared

    def shown_tokens(self) -> int:
        """The live line's token figure, counted as the run summary counts it: the runs'
        tokens (what the cap counts, the interview's apart); for an attempt, its own spend
        on its task (its figure among the summary's attempts)."""
        if self.fork_tokens is not None:
            return max(0, self.session.tokens_used - self.fork_tokens)
        return self.run_tokens()

    def check_caps(self) -> None:
        """Raise ``StopRun`` when the wall-clock or token cap is reached."""
        limit = self.settings.max_wall_clock_minutes * 60
        if limit and time.monotonic() - self.started >= limit:
            raise StopRun(
                "wall_clock",
                f"wall clock cap reached [TILTH_MAX_WALL_CLOCK_MINUTES="
                f"{self.settings.max_wall_clock_minutes}]",
            )
        if self.settings.max_tokens and self.run_tokens() >= self.settings.max_tokens:
            raise StopRun(
                "token_cap", f"token cap reached [TILTH_MAX_TOKENS={self.settings.max_tokens}]"
            )
