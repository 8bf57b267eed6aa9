"""Going back in a chat: turn numbers in, the timeline controller underneath.

The chat holds no rewind logic: it names a turn's checkpoint and asks the timeline
controller for the plan (shown to the person before anything changes), then executes
it there, journaled and undoable, exactly as ``tilth rewind`` does from the command
line. What is chat-specific is small: turns are numbered from 1, a rewind of the
conversation hands back the turn's prompt for the input box, and the directory watcher
settles after files were restored.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilth.chat.session import THREAD_KEY
from tilth.errors import Aborted, UsageError
from tilth.session.store import Session
from tilth.session.threads import StoredMessage
from tilth.timeline.record.checkpoints import Checkpoint
from tilth.timeline.rewind.plan import SCOPES, RewindPlan
from tilth.timeline.rewind.summarize import SummaryPlan

if TYPE_CHECKING:
    from tilth.config import Settings
    from tilth.model.base import Model
    from tilth.session.threads import Thread
    from tilth.timeline.controller import TimelineController
    from tilth.timeline.record.dir_capture import DirCapture

ShowPlan = Callable[[RewindPlan], bool]
"""Shown the plan before it runs; returns False to cancel (nothing changes then)."""

DIRECTIONS = ("from", "up-to")


class ChatTimeline:
    """The go-back half of ``ChatEngine`` (mixed in; uses the engine's attributes)."""

    session: Session
    settings: Settings
    model: Model
    controller: TimelineController
    capture: DirCapture
    directory: Path
    thread: Thread

    def turns(self) -> list[Checkpoint]:
        raise NotImplementedError

    def emit(self, type_: str, **data: Any) -> None:
        raise NotImplementedError

    # ---- turns ---------------------------------------------------------------------------------
    def turn(self, number: int) -> Checkpoint:
        """Turn ``number``'s checkpoint (1 = the first), or a ``UsageError`` naming the range."""
        turns = self.turns()
        if not turns:
            raise UsageError("there are no turns to go back to yet")
        if not 1 <= number <= len(turns):
            raise UsageError(
                f"there is no turn {number}; "
                + ("there is only turn 1" if len(turns) == 1 else f"the turns are 1-{len(turns)}"),
                hint="/checkpoints lists them",
            )
        return turns[number - 1]

    def prompt_of(self, checkpoint: Checkpoint) -> str | None:
        """The prompt sent right after ``checkpoint`` (what a conversation rewind gives back).

        Summaries keep the messages they replaced, so the prompt is found even when a
        summary stands in for it now.
        """
        head = checkpoint.threads.get(THREAD_KEY)
        stored = _unfold(self.thread.read())
        start = 0
        if head is not None:
            index = next((i for i, m in enumerate(stored) if m.id == head), None)
            if index is None:
                return None
            start = index + 1
        for message in stored[start:]:
            if message.message.get("role") == "user" and not message.meta.get("kind"):
                content = message.message.get("content")
                return content if isinstance(content, str) else None
        return None

    # ---- rewind --------------------------------------------------------------------------------
    def plan_rewind(self, number: int, scope: str = "both", *, force: bool = False) -> RewindPlan:
        """What going back to the instant before turn ``number`` changes (writes nothing)."""
        if scope not in SCOPES:
            raise UsageError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
        with self.controller.writing():
            return self.controller.plan_rewind(self.turn(number), scope, force=force)

    def rewind(
        self,
        number: int,
        scope: str = "both",
        *,
        force: bool = False,
        show: ShowPlan | None = None,
    ) -> dict[str, Any]:
        """Go back to the instant before turn ``number``; returns the ``rewound`` event data.

        ``show`` sees the plan first and may cancel (``Aborted`` is raised then). After a
        rewind of the conversation, ``prompt`` is turn ``number``'s prompt, for the input box.
        """
        with self.controller.writing(lambda text: self.emit("notice", text=text)):
            target = self.turn(number)
            plan = self.controller.plan_rewind(target, scope, force=force)
            if show is not None and not show(plan):
                raise Aborted("cancelled; nothing was changed")
            prompt = self.prompt_of(target) if scope != "code" else None
            self.controller.execute(plan)
        self.capture.finish_turn()  # the restored files are the new baseline
        data = {
            "op": "rewind",
            "target": target.id,
            "turn": number,
            "scope": scope,
            "prompt": prompt,
            "files": [list(item) for item in plan.files],
            "conflicts": plan.conflicts,
        }
        self.emit("rewound", **data)
        return data

    # ---- undo ----------------------------------------------------------------------------------
    def plan_undo(self) -> RewindPlan:
        """What undoing the last go-back changes (writes nothing)."""
        with self.controller.writing():
            return self.controller.plan_undo()

    def undo(self, *, show: ShowPlan | None = None) -> dict[str, Any]:
        """Return to the state before the last rewind (or undo)."""
        with self.controller.writing(lambda text: self.emit("notice", text=text)):
            plan = self.controller.plan_undo()
            if show is not None and not show(plan):
                raise Aborted("cancelled; nothing was changed")
            self.controller.execute(plan)
        self.capture.finish_turn()
        data = {
            "op": "undo",
            "target": plan.target,
            "turn": None,
            "scope": plan.scope,
            "prompt": None,
            "files": [list(item) for item in plan.files],
            "conflicts": plan.conflicts,
        }
        self.emit("rewound", **data)
        return data

    # ---- fork and summarize ----------------------------------------------------------------------
    def plan_fork(self, number: int) -> RewindPlan:
        """What forking from just before turn ``number`` makes (writes nothing)."""
        with self.controller.writing():
            return self.controller.plan_fork(self.turn(number))

    def fork(self, number: int, *, show: ShowPlan | None = None) -> dict[str, Any]:
        """A new chat session whose directory and conversation equal the instant before turn N.

        The fork gets a directory of its own; this chat and its directory are not changed.
        """

        def notice(text: str) -> None:
            self.emit("notice", text=text)

        with self.controller.writing(notice):
            target = self.turn(number)
            plan = self.controller.plan_fork(target)
            if show is not None and not show(plan):
                raise Aborted("cancelled; nothing was changed")
            # As every fork: the new directory gets TILTH_SETUP_COMMAND (SetupFailed if not).
            result = self.controller.execute_fork(plan, on_progress=notice)
        for note in result.notes:
            notice(note)
        child = result.session
        data = {
            "session_id": child.id,
            "directory": str(child.record().workspace or child.workspace_dir),
            "checkpoint": target.id,
            "turn": number,
        }
        self.emit("forked", **data)
        return data

    def plan_summarize(self, number: int, direction: str) -> SummaryPlan:
        """Which messages summarizing from / up to turn ``number`` replaces (no model call)."""
        if direction not in DIRECTIONS:
            raise UsageError(f"direction must be 'from' or 'up-to', got {direction!r}")
        return self.controller.plan_summary(self.turn(number), direction, thread_key=THREAD_KEY)

    def summarize(
        self, number: int, direction: str, *, show: Callable[[SummaryPlan], bool] | None = None
    ) -> dict[str, Any]:
        """Replace the conversation up to / from the instant before turn N with a summary."""
        if direction not in DIRECTIONS:
            raise UsageError(f"direction must be 'from' or 'up-to', got {direction!r}")
        with self.controller.writing(lambda text: self.emit("notice", text=text)):
            target = self.turn(number)
            plan = self.controller.plan_summary(target, direction, thread_key=THREAD_KEY)
            if show is not None and not show(plan):
                raise Aborted("cancelled; nothing was changed")
            result = self.controller.summarize(target, direction, self.model, thread_key=THREAD_KEY)
        data = {
            "checkpoint": target.id,
            "turn": number,
            "direction": direction,
            "replaced": len(result.replaced),
            "summary": str(result.summary.message.get("content") or ""),
        }
        self.emit("summarized", **data)
        return data


def _unfold(messages: list[StoredMessage]) -> list[StoredMessage]:
    """The thread with every summary replaced by the messages it stands for (recursively)."""
    out: list[StoredMessage] = []
    for message in messages:
        replaced = message.meta.get("replaced") if message.meta.get("kind") == "summary" else None
        if isinstance(replaced, list):
            inner = [
                StoredMessage(str(i["id"]), dict(i["message"]), dict(i.get("meta") or {}))
                for i in replaced
                if isinstance(i, dict) and "id" in i and isinstance(i.get("message"), dict)
            ]
            out += _unfold(inner)
        else:
            out.append(message)
    return out
