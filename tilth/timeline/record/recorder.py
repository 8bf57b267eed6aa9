"""The Recorder: marks checkpoints on the timeline as the run loop and prep-feature go.

Recording is a pure read of the session directory plus ``git rev-parse HEAD``:
the caller persists prd.json, tasks/*.json, the ledger, threads and tokens
*before* it calls the recorder. Nothing here scans the event log or reads a
thread from its start.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilth import git
from tilth.session.events import utc_now
from tilth.session.harness_state import HarnessState
from tilth.session.store import Session
from tilth.timeline.record.checkpoints import (
    Checkpoint,
    checkpoint_id,
    checkpoint_path,
    highest_seq,
    stored_seqs,
    write_checkpoint,
)
from tilth.timeline.record.git_reads import dirty_paths
from tilth.timeline.record.state_capture import log_tail, read_harness_state, thread_heads
from tilth.timeline.record.turn_capture import TurnCapture

if TYPE_CHECKING:
    from tilth.config import Settings
    from tilth.tools.base import ToolObserver


SNAPSHOT_KINDS = ("turn", "stop")
"""Checkpoints that may fall while the agent's work is uncommitted, so they snapshot the
worktree: a run can stop mid-task (Ctrl-C, an error), and a stop checkpoint holding only
HEAD would fork without that work and make a later rewind take it for the user's."""


class Recorder:
    """Records checkpoints for one session whose worktree is ``worktree``."""

    def __init__(self, session: Session, worktree: Path, settings: Settings | None = None) -> None:
        self.session = session
        self.worktree = worktree
        # Turn snapshots (record.turn_capture): the worker's ToolBox reports writes and
        # shell commands here; it sets itself up on first use, so recorders that never
        # record a turn pay nothing. ``settings`` (default: the environment's) says
        # whose snapshot store they go to.
        self.observer: ToolObserver | None = TurnCapture.for_session(session, worktree, settings)
        """Turn-level file capture; None records heads only."""
        self._next_seq: int | None = None
        self._last_head: str | None = None

    # ---- the four kinds ------------------------------------------------------------------
    def seed(self) -> Checkpoint:
        """The instant the seed was committed; the session's snapshot store is chosen here."""
        if isinstance(self.observer, TurnCapture):
            self.observer.claim_store()
        return self._record("seed", "seed committed")

    def task_start(self, task_id: str) -> Checkpoint:
        """A task is about to start (its base commit is HEAD now)."""
        return self._record("task_start", f"{task_id} start", task_id=task_id)

    def stage(self, task_id: str, stage: str) -> Checkpoint:
        """A stage has completed and been committed."""
        return self._record("stage", f"{task_id} {stage} done", task_id=task_id, stage=stage)

    def turn(
        self, actor: str, *, task_id: str | None, stage: str | None, turn: int, label: str
    ) -> Checkpoint:
        """A model turn (and the tools it ran) has finished."""
        return self._record("turn", label, task_id=task_id, stage=stage, turn=turn, actor=actor)

    def stop(self, reason: str) -> Checkpoint:
        """The run stopped (its ``stop`` event and final status are on disk): the latest
        checkpoint is then the finished state itself."""
        return self._record("stop", f"run stopped ({reason})")

    def close(self) -> None:
        """Release the turn capture's watcher (inotify handles)."""
        if isinstance(self.observer, TurnCapture):
            self.observer.close()

    # ---- recording -----------------------------------------------------------------------
    def _allocate_seq(self) -> int:
        # Read again each time: a go-back in this process (chat, the web UI) may have
        # recorded an undo point since, and ids are never handed out twice.
        seq = max(self._next_seq or 0, highest_seq(self.session) + 1)
        self._next_seq = seq + 1
        return seq

    def _previous_head(self) -> str | None:
        if self._last_head is not None:
            return self._last_head
        import json

        for seq in reversed(stored_seqs(self.session)):
            try:
                data = json.loads(checkpoint_path(self.session, seq).read_text("utf-8"))
            except (OSError, ValueError):
                return None
            if isinstance(data, dict) and not str(data.get("kind", "")).startswith("before-"):
                break  # undo points are not where the run stood
        else:
            return None
        head = data.get("head") if isinstance(data, dict) else None
        return str(head) if head else None

    def _record(
        self,
        kind: str,
        label: str,
        *,
        task_id: str | None = None,
        stage: str | None = None,
        turn: int | None = None,
        actor: str | None = None,
    ) -> Checkpoint:
        head = git.head(self.worktree)
        size, event_seq = log_tail(self.session.events.path)
        overlay, files, gaps = self._capture_files(kind, head)
        seq = self._allocate_seq()
        checkpoint = Checkpoint(
            id=checkpoint_id(seq),
            seq=seq,
            kind=kind,
            ts=utc_now(),
            label=label,
            task_id=task_id,
            stage=stage,
            turn=turn,
            actor=actor,
            head=head,
            event_offset=size,
            event_seq=event_seq,
            state=read_harness_state(self.session).to_dict(),
            threads=thread_heads(self.session.threads.directory),
            overlay=overlay,
            files_changed=files,
            gaps=gaps,
        )
        write_checkpoint(self.session, checkpoint)
        self._last_head = head
        return checkpoint

    def _capture_files(
        self, kind: str, head: str
    ) -> tuple[dict[str, str | None], list[str], list[str]]:
        """Overlay, files changed since the previous checkpoint, and capture gaps.

        Without an observer only committed changes are seen; a turn that leaves
        uncommitted work says so in its gaps, because a rewind to it restores HEAD.
        """
        if kind in SNAPSHOT_KINDS and isinstance(self.observer, TurnCapture):
            # Turn snapshots: the overlay over head, the files this turn changed, and
            # what could not be captured.
            turn = self.observer.finish_turn()
            return turn.overlay, turn.files_changed, turn.gaps
        previous = self._previous_head()
        files: list[str] = []
        if previous and previous != head:
            out = git.git("diff", "--name-only", "--no-renames", previous, head, cwd=self.worktree)
            files = [line for line in out.splitlines() if line]
        overlay: dict[str, str | None] = {}
        gaps: list[str] = []
        if kind in SNAPSHOT_KINDS and self.observer is None:
            dirty = dirty_paths(self.worktree)
            if dirty:
                files = sorted(set(files) | set(dirty))
                gaps.append(
                    f"{len(dirty)} uncommitted file(s) not snapshotted; "
                    "a rewind here restores the last commit"
                )
        return overlay, files, gaps


def describe_state(checkpoint: Checkpoint) -> dict[str, Any]:
    """A short summary of a checkpoint's harness state (for ``--json`` listings)."""
    state = HarnessState.from_dict(checkpoint.state)
    return {
        "tasks": state.task_statuses(),
        "tokens_used": state.tokens_used,
        "status": state.status,
    }
