"""The interview engine: a tool-using loop on the prep model that ends in ``write_seed``.

Each turn goes through ``tilth.agent.turn`` so the interview records ``model_call``,
``tool_call`` and ``tool_result`` exactly like the worker. The model reads the
source repo (confined, read-only), asks the user through the frontend, and ends
by handing a bundle to the sink. Endings: the seed is written (return); the model
stops calling tools twice in a row (one nudge in between), keeps repeating the same
failing call, returns nothing usable too often, or reaches the turn cap
(``InterviewAbort`` carrying the ``stop`` reason to log). Model endpoint errors and
Ctrl-C propagate.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from tilth.agent.context import ContextKeeper
from tilth.agent.repeats import RepeatedFailure, guard_for
from tilth.agent.stops import StopReason, StopRun
from tilth.agent.turn import Actor, Notice, answer, log_call, say, take_turn
from tilth.errors import TilthError
from tilth.model.base import Model, OnDelta, ToolCall
from tilth.seed.frontend import InterviewFrontend, SeedSink
from tilth.seed.tools import ASK_USER, CONTROL_SCHEMAS
from tilth.session.events import utc_now
from tilth.session.schemas import SCHEMAS
from tilth.session.seed_rules import SeedRuleError
from tilth.session.store import Session
from tilth.tools import READ_ONLY_TOOL_NAMES, ToolBox

ACTOR = "interviewer"
THREAD_KEY = "interviewer"
MAX_TURNS = 60
MAX_EMPTY_RETRIES = 3
SEED_META_SCHEMA = SCHEMAS["seed-meta"]
PREVIEW_CHARS = 200

NUDGE = (
    "Your last reply called no tool, so the user saw nothing. Every reply must call a tool: "
    "use ask_user to talk to the user, read_file/glob/grep to look at the code, or write_seed "
    "to finish. Continue the interview now."
)


class InterviewAbort(TilthError):
    """The interview ended without a seed; ``reason`` is the ``stop`` reason to record."""

    def __init__(self, message: str, *, reason: StopReason) -> None:
        super().__init__(message)
        self.reason: StopReason = reason


@dataclass
class InterviewResult:
    """What a successful interview wrote."""

    tasks: int
    test_files: list[str]
    meta: dict[str, Any]
    turns: int

    @property
    def tokens_used(self) -> int:
        return int(self.meta["tokens"]["total"])


@dataclass
class InterviewClock:
    """The interview's wall-clock cap (``TILTH_MAX_WALL_CLOCK_MINUTES``): it counts the
    time spent on the model and the tools, not the time a question waits for its answer."""

    minutes: float
    """The cap; 0 turns it off."""
    started: float = field(default_factory=time.monotonic)
    """A ``time.monotonic()`` instant: when the prep began."""
    answering: float = 0.0
    """Seconds spent waiting for the user's answers (added to the deadline)."""

    def deadline(self) -> float | None:
        """The ``time.monotonic()`` instant the cap ends (None: no cap)."""
        if not self.minutes:
            return None
        return self.started + self.minutes * 60 + self.answering

    def check(self) -> None:
        """Raise ``InterviewAbort(wall_clock)`` once the cap is reached."""
        deadline = self.deadline()
        if deadline is not None and time.monotonic() >= deadline:
            raise self.reached("")

    def reached(self, when: str) -> InterviewAbort:
        """The stop for a reached cap; ``when`` says where it was (" mid-reply")."""
        return InterviewAbort(
            f"the interview reached the wall-clock cap{when} "
            f"[TILTH_MAX_WALL_CLOCK_MINUTES={self.minutes:g}]; the time waiting for your "
            "answers is not counted",
            reason="wall_clock",
        )


@dataclass
class _Tally:
    prompt: int = 0
    completion: int = 0
    started_at: str = field(default_factory=utc_now)

    def as_dict(self) -> dict[str, int]:
        return {
            "prompt": self.prompt,
            "completion": self.completion,
            "total": self.prompt + self.completion,
        }


def system_prompt() -> str:
    """The interviewer's system prompt (``tilth/seed/prompt.md``, shipped as package data)."""
    return resources.files("tilth.seed").joinpath("prompt.md").read_text(encoding="utf-8")


def opening_message(source: Path, brief: str) -> str:
    """The first user message: where the code is and what the user wants."""
    return (
        f"## Source repository\n{source}\n\n## Feature / refactor brief\n{brief.strip()}\n\n"
        "Begin with step 1 of the workflow. One question per ask_user call."
    )


def run_interview(
    *,
    session: Session,
    source: Path,
    model: Model,
    frontend: InterviewFrontend,
    sink: SeedSink,
    brief: str,
    max_turns: int = MAX_TURNS,
    max_empty_retries: int = MAX_EMPTY_RETRIES,
    backoff_seconds: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
    on_delta: OnDelta | None = None,
    on_notice: Notice | None = None,
    context: ContextKeeper | None = None,
    max_reply_tokens: int | None = None,
    clock: InterviewClock | None = None,
    repeat_limit: int = 3,
) -> InterviewResult:
    """Interview until a seed is written; raises ``InterviewAbort`` when it cannot be.

    ``on_notice`` hears retries and cut-off replies; ``context`` keeps the thread within
    the model's window; ``clock`` holds the wall-clock cap, between turns and inside one
    (a reply still streaming at the deadline is cancelled); ``repeat_limit`` replies
    repeating the same failing call end the interview (``TILTH_MAX_REPEATED_FAILURES``; 0:
    never)."""
    clock = clock or InterviewClock(0)
    actor = Actor(
        session=session,
        name=ACTOR,
        model=model,
        thread=session.threads.get(THREAD_KEY),
        toolbox=ToolBox(source, READ_ONLY_TOOL_NAMES),
        control_schemas=CONTROL_SCHEMAS,
        scripted=model.name.lower().startswith("scripted"),
        on_delta=on_delta,
        on_notice=on_notice,
        context=context,
        max_reply_tokens=max_reply_tokens,
        repeats=guard_for(repeat_limit),
    )
    actor.thread.append({"role": "system", "content": system_prompt()}, turn=0)
    actor.thread.append({"role": "user", "content": opening_message(source, brief)}, turn=0)
    tally = _Tally()
    empty_streak = 0
    nudged = False
    for number in range(1, max_turns + 1):
        clock.check()
        actor.deadline = clock.deadline()
        try:
            result = take_turn(actor, number)
        except StopRun as stop:
            if stop.reason != "wall_clock":
                raise
            raise clock.reached(" mid-reply") from None
        except RepeatedFailure as stuck:
            raise InterviewAbort(
                f"the interview stopped: {stuck.detail} [TILTH_MAX_REPEATED_FAILURES="
                f"{repeat_limit}]; try a stronger TILTH_PREP_MODEL",
                reason="no_case",
            ) from None
        tally.prompt += result.turn.usage.prompt_tokens
        tally.completion += result.turn.usage.completion_tokens
        frontend.update_tokens(tally.prompt, tally.completion)
        if result.empty:
            empty_streak += 1
            session.log("empty_model_response", actor=ACTOR, turn=number, streak=empty_streak)
            if empty_streak > max_empty_retries:
                raise InterviewAbort(
                    f"the prep model returned {empty_streak} empty responses in a row",
                    reason="empty_responses",
                )
            sleep(backoff_seconds * 2 ** (empty_streak - 1))
            continue
        empty_streak = 0
        if not result.turn.tool_calls:
            if nudged:
                said = (result.turn.content or "").strip()[:300]
                raise InterviewAbort(
                    f"the prep model stopped calling tools before write_seed "
                    f"(nudged once). Last message: {said!r}",
                    reason="no_case",
                )
            nudged = True
            session.log("interview_nudge", actor=ACTOR, turn=number)
            say(actor, NUDGE, turn=number, nudge=True)
            continue
        nudged = False
        written = _control_calls(actor, number, result.control_calls, frontend, sink, tally, clock)
        if written is not None:
            return written
    raise InterviewAbort(
        f"the interview reached its cap of {max_turns} turns without write_seed",
        reason="iter_cap",
    )


def _control_calls(
    actor: Actor,
    number: int,
    calls: list[ToolCall],
    frontend: InterviewFrontend,
    sink: SeedSink,
    tally: _Tally,
    clock: InterviewClock,
) -> InterviewResult | None:
    """Answer ``ask_user`` and ``write_seed`` calls; the result once a seed is written."""
    done: InterviewResult | None = None
    for call in calls:
        if done is not None:
            log_call(actor, number, call)
            answer(actor, number, call, "not run: the seed was already written", is_error=True)
            continue
        try:
            args = call.parse_arguments()
        except ValueError as exc:  # JSON, but not an object (the turn answered non-JSON)
            log_call(actor, number, call)
            text = f"ERROR: could not read the {call.name} call: {exc}. Call it again."
            answer(actor, number, call, text, is_error=True)
            continue
        if call.name == ASK_USER:
            log_call(actor, number, call, args)
            asked = time.monotonic()
            try:
                _ask(actor, number, call, args, frontend)
            finally:
                clock.answering += time.monotonic() - asked
        else:  # write_seed: the turn answered every name that is not a control tool
            log_call(actor, number, call, _preview_seed_args(args))
            done = _write(actor, number, call, args, sink, tally)
    return done


def _ask(
    actor: Actor, number: int, call: ToolCall, args: dict[str, Any], frontend: InterviewFrontend
) -> None:
    question = args.get("question")
    options = args.get("options")
    if not isinstance(question, str) or not question.strip():
        answer(
            actor,
            number,
            call,
            "ERROR: ask_user needs a non-empty 'question' string",
            is_error=True,
        )
        return
    if options is not None and (
        not isinstance(options, list) or not all(isinstance(o, str) and o.strip() for o in options)
    ):
        answer(
            actor,
            number,
            call,
            "ERROR: ask_user 'options' must be a list of non-empty "
            "strings (or omitted for a free-text question)",
            is_error=True,
        )
        return
    reply = frontend.ask_user(question.strip(), [o.strip() for o in options] if options else None)
    answer(actor, number, call, reply if reply.strip() else "(no answer)")
    if actor.repeats is not None and reply.strip():
        actor.repeats.heard_from_person()


def _write(
    actor: Actor,
    number: int,
    call: ToolCall,
    args: dict[str, Any],
    sink: SeedSink,
    tally: _Tally,
) -> InterviewResult | None:
    try:
        meta = seed_meta(args, actor.model.name, tally)
        written = sink.write_seed(args.get("prd_entries"), args.get("test_files"), meta)
    except SeedRuleError as exc:
        message = (
            f"ERROR: write_seed rejected, nothing was written: {exc.message} "
            "Fix this and call write_seed again with the complete corrected bundle."
        )
        actor.session.log("seed_rejected", actor=ACTOR, turn=number, error=exc.message)
        answer(actor, number, call, message, is_error=True)
        return None
    tasks = len(args["prd_entries"])
    answer(
        actor,
        number,
        call,
        f"seed written: {tasks} task(s), {len(written)} test file(s). The interview is over.",
    )
    return InterviewResult(tasks=tasks, test_files=written, meta=meta, turns=number)


def seed_meta(args: dict[str, Any], model_name: str, tally: _Tally) -> dict[str, Any]:
    """``seed-meta.json`` for a ``write_seed`` call; ``SeedRuleError`` on malformed fields."""
    tldr = args.get("tldr")
    if not isinstance(tldr, str):
        raise SeedRuleError("tldr must be a string (one markdown bullet per task)")
    lists: dict[str, list[str]] = {}
    for key in ("open_questions", "blockers"):
        value = args.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SeedRuleError(f"{key} must be a list of strings")
        lists[key] = list(value)
    scope_notes = args.get("scope_notes") or ""
    if not isinstance(scope_notes, str):
        raise SeedRuleError("scope_notes must be a string")
    return {
        "schema": SEED_META_SCHEMA,
        "interviewer_model": model_name,
        "started_at": tally.started_at,
        "ended_at": utc_now(),
        "tokens": tally.as_dict(),
        "tldr": tldr,
        "open_questions": lists["open_questions"],
        "blockers": lists["blockers"],
        "scope_notes": scope_notes,
    }


def _preview_seed_args(args: dict[str, Any]) -> dict[str, Any]:
    """``write_seed`` arguments for the event log, with test file bodies shortened."""
    shown = dict(args)
    files = args.get("test_files")
    if isinstance(files, dict):
        shown["test_files"] = {
            name: _preview(content) if isinstance(content, str) else content
            for name, content in files.items()
        }
    return shown


def _preview(text: str) -> str:
    if len(text) <= PREVIEW_CHARS:
        return text
    return f"{text[:PREVIEW_CHARS]}… [+{len(text) - PREVIEW_CHARS} chars]"
