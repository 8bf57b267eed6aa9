"""Recording checkpoints for a session that works in a plain directory (``tilth chat``).

One checkpoint per user turn, written when the turn *starts*: going back to turn N returns
to the instant just before turn N's prompt was sent (the third seed's semantics), so the
checkpoint holds the files, the conversation and the harness state of that instant, and
is labelled with the prompt. When the turn ends, the same checkpoint is completed with the
files the turn changed and what it could not capture, and the end state is pinned as the
newest code state Tilth itself produced (``timeline/code-state.json``): a rewind compares
the directory with it to tell the user's own edits from the agent's.
"""

from __future__ import annotations

from tilth.session.events import utc_now
from tilth.session.files import atomic_write_json
from tilth.session.store import Session
from tilth.timeline.record.checkpoints import (
    Checkpoint,
    checkpoint_id,
    checkpoint_path,
    highest_seq,
    timeline_dir,
    write_checkpoint,
)
from tilth.timeline.record.dir_capture import DirCapture
from tilth.timeline.record.state_capture import capture_state, log_tail, thread_heads

LABEL_CHARS = 120


def turn_label(prompt: str) -> str:
    """The picker label for a prompt: its first non-blank line, cut to a listing's width."""
    line = next((ln.strip() for ln in prompt.splitlines() if ln.strip()), "")
    return line if len(line) <= LABEL_CHARS else line[: LABEL_CHARS - 3] + "..."


def write_code_state(session: Session, head: str, overlay: dict[str, str | None]) -> None:
    """Pin (head, overlay) as the newest code state Tilth produced (``rewind.code_state``)."""
    atomic_write_json(
        timeline_dir(session) / "code-state.json",
        {"schema": 1, "head": head, "overlay": overlay, "after_seq": highest_seq(session)},
    )


class DirRecorder:
    """Turn checkpoints for one plain-directory session, captured by ``capture``."""

    def __init__(self, session: Session, capture: DirCapture, *, actor: str = "chat") -> None:
        self.session = session
        self.capture = capture
        self.actor = actor

    def turn_start(self, turn: int, prompt: str) -> Checkpoint:
        """Record the instant before ``prompt`` is sent as turn ``turn``'s checkpoint."""
        state = self.capture.finish_turn()  # includes edits made between turns
        size, event_seq = log_tail(self.session.events.path)
        seq = highest_seq(self.session) + 1
        checkpoint = Checkpoint(
            id=checkpoint_id(seq),
            seq=seq,
            kind="turn",
            ts=utc_now(),
            label=turn_label(prompt),
            task_id=None,
            stage=None,
            turn=turn,
            actor=self.actor,
            head=state.head,
            event_offset=size,
            event_seq=event_seq,
            state=capture_state(self.session),
            threads=thread_heads(self.session.threads.directory),
            overlay=dict(state.overlay),
        )
        write_checkpoint(self.session, checkpoint)
        return checkpoint

    def turn_end(self, checkpoint: Checkpoint) -> Checkpoint:
        """Complete ``checkpoint`` with what its turn changed; pin the state the turn left."""
        state = self.capture.finish_turn()
        checkpoint.files_changed = state.files_changed
        checkpoint.gaps = state.gaps
        if checkpoint_path(self.session, checkpoint.seq).is_file():
            write_checkpoint(self.session, checkpoint)
        write_code_state(self.session, state.head, dict(state.overlay))
        return checkpoint
