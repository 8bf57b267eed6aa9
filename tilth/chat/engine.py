"""The chat engine: a conversation with the worker tools, working directly in a directory.

UI-independent: the terminal (``tilth chat``) and the web UI drive the same engine. A
front end calls ``send(prompt)`` and hears what happens through one listener callback
(``tilth.chat.events``); it goes back through the ``ChatTimeline`` methods (``rewind``,
``fork``, ``summarize``, ``undo``), which plan and execute through the timeline
controller, so a chat session can equally be rewound from the command line.

Each user turn records one checkpoint before its prompt is sent (file snapshots of the
directory, the thread and the harness state of that instant), labelled with the prompt.
No git command ever runs in the directory.
"""

from __future__ import annotations

import threading
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from tilth.agent.context import ContextKeeper, window_for
from tilth.agent.prompts import CONTEXT_FILES_CAP, context_files
from tilth.agent.repeats import RepeatedFailure, guard_for
from tilth.agent.stops import StopReason
from tilth.agent.turn import Actor, take_turn
from tilth.chat.events import CancelToken, ChatEvent, Confirm, Listener, TurnCancelled
from tilth.chat.goback import ChatTimeline
from tilth.chat.session import (
    THREAD_KEY,
    chat_directory,
    chat_workspace,
    create_chat_session,
    hold_open,
    open_chat_session,
    tilth_places,
    transcript,
)
from tilth.chat.toolview import describe_call, edit_diff, line_count, preview, read_before
from tilth.chat.turn_index import TurnIndex
from tilth.config import Settings
from tilth.environment.project import ProjectEnv, resolve_project_env
from tilth.errors import (
    ContextOverflow,
    ContextTooSmall,
    ModelError,
    ProjectEnvError,
    SessionLocked,
    TilthError,
    UsageError,
)
from tilth.model.base import Delta, Model, ToolCall
from tilth.model.endpoint_facts import no_tools_warning
from tilth.session.lock import SessionLock
from tilth.session.store import Session
from tilth.timeline.controller import TimelineController
from tilth.timeline.record.blob_store import BlobStore, register_root, remember_store
from tilth.timeline.record.checkpoints import Checkpoint
from tilth.timeline.record.dir_capture import DirCapture
from tilth.timeline.record.dir_recorder import DirRecorder
from tilth.tools import ToolBox
from tilth.tools.base import ToolOutcome
from tilth.tools.sandbox import sandbox_for, sandbox_status, unsandboxed_warning

MAX_STEPS_PER_TURN = 40
"""Model calls in one user turn before the engine stops and hands back to the person."""
MAX_PROMPT_CHARS = 200_000
"""Longer prompts are refused before anything is recorded (put long text in a file)."""
RESULT_PREVIEW = 2_000


def system_prompt(directory: Path, settings: Settings) -> str:
    """The chat's system message: how to work, plus the project's context files."""
    text = (resources.files("tilth.chat") / "system.md").read_text("utf-8").strip()
    context, names = context_files(directory, settings.context_files)
    if context:
        text += f"\n\n## Project context ({', '.join(names)})\n\n{context}"
    return text[: CONTEXT_FILES_CAP * 4]


class ChatEngine(ChatTimeline):
    """One chat session: send prompts, hear events, go back to any turn."""

    def __init__(
        self,
        session: Session,
        settings: Settings,
        model: Model,
        *,
        listener: Listener | None = None,
        confirm: Confirm | None = None,
        index_in_background: bool = True,
    ) -> None:
        self.session = session
        self.settings = settings
        self.model = model
        self.directory = chat_workspace(session, keep_out=tilth_places(settings))
        self.listener: Listener = listener or (lambda event: None)
        self.confirm = confirm
        self.controller = TimelineController(session, settings)
        self.store = BlobStore.for_home(settings.home)
        self.capture = DirCapture(self.directory, self.store).start(background=index_in_background)
        self.recorder = DirRecorder(session, self.capture)
        self.environment = _project_env(session, self.directory, settings)
        # The autonomous worker's sandbox (SPEC 5.5), with the directory as the one
        # writable place (its .git stays read-only); None runs unsandboxed (auto).
        self.sandbox = sandbox_for(
            settings,
            self.directory,
            session_dir=session.dir,
            readable=self.environment.readable_paths() if self.environment else (),
        )
        self.toolbox = ToolBox(
            self.directory,
            observer=self.capture,
            confirm=self._approve,
            environment=self.environment,
            sandbox=self.sandbox,
        )
        self.thread = session.threads.get(THREAD_KEY)
        self._turn_index = TurnIndex(session)
        self._busy = threading.Lock()
        self._first_use = True
        self._context: ContextKeeper | None = None
        """The thread's size against the model's window (made on the first turn)."""
        self._window: dict[str, int] = {}
        self._window_asked = threading.Thread(
            target=lambda: self._window.update(tokens=window_for(model, settings)),
            name="tilth-chat-window",
            daemon=True,
        )
        # Asked of the endpoint now, so the first prompt does not wait for the answer.
        self._window_asked.start()
        self._checkpoint: str | None = None
        """The checkpoint of the turn in flight."""
        self._streamed = False
        """The reply in flight streamed text (else it is shown whole when it ends)."""
        self._outcomes: list[str] = []
        """How each turn sent through this engine ended (``done``, ``cancelled``, ``error``)."""
        self._last_error: str | None = None
        self._open: SessionLock | None = None
        """The open-lock ``start``/``resume`` took (``hold_open``); ``close`` gives it back."""

    @classmethod
    def _opened(cls, session: Session, settings: Settings, model: Model, **options: Any) -> Any:
        """An engine on ``session`` holding its open-lock (refused while another has it)."""
        held = hold_open(session)
        try:
            listener = options.get("listener")
            # A fork a crash interrupted is completed first: its directory may not exist yet.
            TimelineController(session, settings).complete_fork(
                (lambda text: listener(ChatEvent("notice", {"text": text}))) if listener else None
            )
            engine = cls(session, settings, model, **options)
        except BaseException:
            held.release()
            raise
        engine._open = held
        return engine

    # ---- opening ------------------------------------------------------------------------------
    @classmethod
    def start(
        cls, settings: Settings, directory: Path | str, model: Model, **options: Any
    ) -> ChatEngine:
        """A new chat session working in ``directory`` (checked: exists, is writable)."""
        where = chat_directory(directory, keep_out=tilth_places(settings))
        session = create_chat_session(settings, where)
        session.threads.get(THREAD_KEY).append(
            {"role": "system", "content": system_prompt(where, settings)}, kind="system"
        )
        engine: ChatEngine = cls._opened(session, settings, model, **options)
        return engine

    @classmethod
    def resume(
        cls, settings: Settings, session_id: str, model: Model, **options: Any
    ) -> ChatEngine:
        """Continue the chat session ``session_id`` with its thread and checkpoints."""
        session = open_chat_session(settings, session_id)
        engine: ChatEngine = cls._opened(session, settings, model, **options)
        session.update_checkpoint(status="running")
        session.log("session_resume", kind="chat", turns=len(engine.turns()))
        return engine

    def close(
        self, *, status: Literal["all_done", "failed"] = "all_done", stopped: str | None = None
    ) -> None:
        """Stop watching the directory, record how the chat ended, close the model's
        connections, let another front end open it.

        A chat whose every turn failed ends ``failed``, whatever the front end says.
        ``stopped``: a signal ended it (``stop {interrupted, detail}``; it resumes as ever).
        """
        self.capture.close()
        details: dict[str, Any] = {}
        if self._outcomes and all(outcome == "error" for outcome in self._outcomes):
            status = "failed"
            details["detail"] = f"every turn failed; the last: {self._last_error}"
        reason: StopReason = "all_done" if status == "all_done" else "error"
        if stopped is not None:
            reason, details["detail"] = "interrupted", stopped
        try:
            with self.session.lock():
                self.session.update_checkpoint(status=status)
                self.session.log("stop", reason=reason, **details)
        except SessionLocked:
            pass  # another front end holds it; it records its own ending
        except (OSError, TilthError):
            pass  # the session was deleted meanwhile (tilth reset): nothing left to record
        finally:
            _close_model(self.model)
            if self._open is not None:
                self._open.release()

    # ---- facts a front end shows ----------------------------------------------------------
    @property
    def id(self) -> str:
        return self.session.id

    def sandbox_warning(self) -> str | None:
        """The one line to show when ``bash`` runs without the sandbox (None when sandboxed)."""
        if self.sandbox is not None:
            return None
        return unsandboxed_warning(sandbox_status(self.settings)[1])

    def tools_warning(self) -> str | None:
        """The one line to show when the model's server says it takes no tools."""
        return no_tools_warning(self.model)

    @property
    def tokens_used(self) -> int:
        return self.session.tokens_used

    def emit(self, type_: str, **data: Any) -> None:
        self.listener(ChatEvent(type_, data))

    def history(self) -> list[dict[str, Any]]:
        """The conversation as a front end shows it: ``{role, text, turn?, tools?}`` items."""
        return transcript(self.thread)

    # ---- one user turn -------------------------------------------------------------------------
    def send(self, prompt: str, cancel: CancelToken | None = None) -> dict[str, Any]:
        """Run one user turn; returns the ``turn_finished`` data. Model errors end the turn only.

        Raises ``UsageError`` for a blank or oversized prompt and when another turn is in
        flight, ``SessionLocked`` when another process holds the session.
        """
        if not prompt.strip():
            raise UsageError("the prompt is empty; nothing was sent")
        if len(prompt) > MAX_PROMPT_CHARS:
            raise UsageError(
                f"the prompt is {len(prompt):,} characters; the limit is {MAX_PROMPT_CHARS:,}. "
                "Nothing was sent",
                hint="put long text in a file in the directory and ask the model to read it",
            )
        if not self._busy.acquire(blocking=False):
            raise UsageError("a turn is still running", hint="wait for it, or cancel it first")
        try:
            with self.controller.writing(lambda text: self.emit("notice", text=text)):
                return self._turn(prompt, cancel or CancelToken())
        finally:
            self._busy.release()

    def _turn(self, prompt: str, cancel: CancelToken) -> dict[str, Any]:
        if self._first_use:
            self._first_use = False
            self._register_store()
        number = len(self.turns()) + 1
        checkpoint = self.recorder.turn_start(number, prompt)
        self._checkpoint = checkpoint.id
        self.session.log("user_message", actor="chat", turn=number, checkpoint=checkpoint.id)
        self.thread.append({"role": "user", "content": prompt}, turn=number)
        self.emit("turn_started", turn=number, checkpoint=checkpoint.id, prompt=prompt)
        before = self.session.tokens_used
        outcome, error = "done", None
        try:
            self._steps(number, cancel)
        except TurnCancelled:
            outcome = "cancelled"
            self.thread.append(
                {"role": "user", "content": "[tilth] The person interrupted this turn."},
                kind="interrupted",
                turn=number,
            )
        except _TurnStopped as stopped:
            outcome = "stopped"
            self._stop_turn(number, stopped.reason, stopped.detail)
        except (ModelError, TilthError) as exc:
            outcome, error = "error", str(exc)
            if isinstance(exc, ContextTooSmall):
                error += f" — {exc.hint}"  # what helps: summarizing cannot
            elif isinstance(exc, ContextOverflow):
                # Sending again would meet the same refusal: say what shortens the thread.
                error += (
                    " — the conversation no longer fits the model's context window: "
                    "/summarize N up-to or /rewind N shortens it"
                )
            self.session.log("chat_error", actor="chat", turn=number, error=error)
        finally:
            checkpoint = self.recorder.turn_end(checkpoint)
        self._outcomes.append(outcome)
        self._last_error = error or self._last_error
        result = {
            "turn": number,
            "checkpoint": checkpoint.id,
            "outcome": outcome,
            "error": error,
            "files_changed": checkpoint.files_changed,
            "gaps": checkpoint.gaps,
            "tokens_used": self.session.tokens_used,
            "turn_tokens": self.session.tokens_used - before,
        }
        self.emit("turn_finished", **result)
        return result

    def _register_store(self) -> None:
        from tilth.timeline.record import retention as gc

        remember_store(self.session, self.store)
        register_root(self.store, self.session.dir.parent)
        gc.collect_in_background(self.settings)

    def _actor(self, cancel: CancelToken) -> Actor:
        def run_tool(call: ToolCall) -> ToolOutcome:
            return self._tool(call)

        def checkpoint(label: str) -> str | None:
            # The turn's own checkpoint holds the thread as it was before this turn.
            return self._checkpoint

        def relay(delta: Delta) -> None:
            if delta.kind in ("text", "reasoning"):
                self._streamed |= delta.kind == "text"
                self.emit(delta.kind, text=delta.text, tokens=delta.completion_tokens)

        def notice(kind: str, text: str) -> None:
            self.emit("notice", text=text, kind=kind)

        if self._context is None:
            self._window_asked.join()
            window = self._window.get("tokens") or window_for(self.model, self.settings)
            self._context = ContextKeeper(window, checkpoint)
        return Actor(
            self.session,
            "chat",
            self.model,
            self.thread,
            self.toolbox,
            on_delta=relay,
            on_notice=notice,
            cancel=cancel,
            run_tool=run_tool,
            context=self._context,
            max_reply_tokens=self.settings.max_reply_tokens,
            repeats=guard_for(self.settings.max_repeated_failures),
        )

    def _steps(self, number: int, cancel: CancelToken) -> None:
        """The turn loop (``tilth.agent.turn``) until the model stops calling tools."""
        actor = self._actor(cancel)
        for step in range(1, MAX_STEPS_PER_TURN + 1):
            if cancel.cancelled:
                raise TurnCancelled
            self._streamed = False
            try:
                result = take_turn(actor, number, step=step)
            except RepeatedFailure as stuck:
                limit = f"TILTH_MAX_REPEATED_FAILURES={self.settings.max_repeated_failures}"
                raise _TurnStopped("repeated_failure", f"{stuck.detail} [{limit}]") from None
            turn = result.turn
            if turn.content and not self._streamed:
                # A model that cannot stream: show the whole reply at once.
                self.emit("text", text=turn.content, tokens=turn.usage.completion_tokens)
            if result.empty:
                self.emit("notice", text="the model sent an empty reply")
                return
            if not turn.tool_calls:
                return
        raise _TurnStopped("step_cap", f"the model made {MAX_STEPS_PER_TURN} calls in one turn")

    def _stop_turn(self, number: int, reason: str, detail: str) -> None:
        """Record why the harness ended the turn, tell the model and the person what next."""
        self.session.log("turn_stopped", actor="chat", turn=number, reason=reason, detail=detail)
        self.thread.append(
            {
                "role": "user",
                "content": f"[tilth] The harness stopped this turn: {detail}. Wait for the "
                "person's next message.",
            },
            kind="stopped",
            turn=number,
        )
        self.emit(
            "notice",
            kind="stopped",
            text=f"stopped: {detail}. Send a message to go on (say what to do differently), "
            "or /rewind to go back",
        )

    def _tool(self, call: ToolCall) -> ToolOutcome:
        """Run one toolbox call, showing it before and after (with the edit's diff)."""
        try:
            args = call.parse_arguments()
        except ValueError:
            args = {}  # JSON but not an object: the tool says what is wrong
        self.emit(
            "tool_started",
            call_id=call.id,
            name=call.name,
            args=_shown_args(args),
            summary=describe_call(call.name, args),
        )
        before = read_before(self.toolbox, call.name, args)
        outcome = self.toolbox.dispatch(call.name, call.arguments)
        diff = ""
        if before is not None and not outcome.is_error:
            diff = edit_diff(self.toolbox, args, before)
        self.emit(
            "tool_finished",
            call_id=call.id,
            name=call.name,
            ok=not (outcome.is_error or outcome.blocked),
            blocked=outcome.blocked,
            result=preview(outcome.result, RESULT_PREVIEW),
            lines=line_count(outcome.result),
            diff=diff,
        )
        return outcome

    def _approve(self, command: str, reason: str) -> bool:
        """The ToolBox asks before running a command the guard flags."""
        approved = bool(self.confirm is not None and self.confirm(command, reason))
        self.session.log("bash_confirm", command=command[:2000], reason=reason, approved=approved)
        self.emit("confirm_asked", command=command, reason=reason, approved=approved)
        return approved

    # ---- turns on the timeline -------------------------------------------------------------
    def turns(self) -> list[Checkpoint]:
        """The chat's turn checkpoints, oldest first: turn N is ``turns()[N - 1]``."""
        return self._turn_index.turns()


class _TurnStopped(Exception):
    """The harness ends the user turn (a repeated failing call, the step cap)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def _close_model(model: Model) -> None:
    """Close the model's connections, when it has any (``OpenAIModel``; a later request
    opens new ones, so a model shared with another user stays usable)."""
    close = getattr(model, "close", None)
    if callable(close):
        close()


def _project_env(session: Session, directory: Path, settings: Settings) -> ProjectEnv | None:
    """The directory's own Python environment for ``bash`` (SPEC §5.4), when it has one.

    A chat may work anywhere, not only in a Python project: without one, ``bash`` runs
    with the plain environment (minus secrets), as any shell would.
    """
    try:
        environment = resolve_project_env(directory, directory, settings)
    except ProjectEnvError:
        return None
    session.log("environment", **environment.to_dict())
    return environment


def _shown_args(args: dict[str, Any]) -> dict[str, Any]:
    """Arguments for display: long strings (file contents) cut short."""
    return {
        key: (value[:300] + "..." if isinstance(value, str) and len(value) > 300 else value)
        for key, value in args.items()
    }
