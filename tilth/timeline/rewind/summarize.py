"""Replacing part of a conversation thread with a model-written summary, rewind-safely.

``tilth summarize --at <checkpoint> --direction up-to|from`` takes the checkpoint's head
message of one thread as the boundary: ``up-to`` summarizes everything before it (the
leading system prompt stays), ``from`` everything after it. The summarizer actor runs on
the worker's endpoint. The summary is a new message (a fresh id) whose meta carries
``summary_of`` (the ids it replaced) and ``replaced`` (the messages themselves, never sent
to a model), so a checkpoint anchored inside the summarized part still resolves:
``cut_at`` rebuilds the thread exactly as it was at that checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tilth.errors import ModelError, UsageError
from tilth.model.base import AssistantTurn, Model, RetryHook
from tilth.model.call import ask
from tilth.session.store import Session
from tilth.session.threads import StoredMessage, Thread
from tilth.timeline.record.checkpoints import Checkpoint

DIRECTIONS = ("up-to", "from")
SUMMARY_PROMPT = (
    "You summarize part of a working session between a coding agent, its tools and its "
    "reviewers. Write a compact summary that lets the agent continue without the original "
    "messages: decisions taken, files changed and why, commands run and their outcomes, "
    "open problems and next steps. Keep exact file paths, names and error messages. "
    "Do not invent anything. Answer with the summary text only."
)
_TRANSCRIPT_CAP = 12_000  # characters per message shown to the summarizer
Asker = Callable[[list[dict[str, Any]]], AssistantTurn]
"""Sends the summarizer's request and returns its reply, logging its ``model_call`` (the
turn loop's ``ask_aside`` during a run or a chat turn: cancellable, bounded by the deadline)."""


@dataclass
class SummaryResult:
    """What one summarize did."""

    thread: str
    summary: StoredMessage
    replaced: list[str]
    direction: str


# ---- resolving anchors through summaries -----------------------------------------------------
def _from_dict(item: dict[str, Any]) -> StoredMessage:
    return StoredMessage(str(item["id"]), dict(item["message"]), dict(item.get("meta") or {}))


def _contains(message: StoredMessage, head: str) -> bool:
    """True when ``message`` is a summary that (directly or nested) replaced ``head``."""
    replaced = message.meta.get("replaced")
    if not isinstance(replaced, list):
        return False
    return any(
        item.get("id") == head or _contains(_from_dict(item), head)
        for item in replaced
        if isinstance(item, dict)
    )


def cut_at(stored: list[StoredMessage], head: str | None) -> list[StoredMessage] | None:
    """The thread as it was when ``head`` was its last message; None when head is unknown.

    When ``head`` is still in the thread the answer is the prefix ending at it. When a
    summary replaced it, the prefix before that summary plus the summary's archived
    messages up to ``head`` (recursively, for summaries of summaries).
    """
    if head is None:
        return []
    for index, message in enumerate(stored):
        if message.id == head:
            return stored[: index + 1]
        if _contains(message, head):
            inner = [_from_dict(i) for i in message.meta["replaced"] if isinstance(i, dict)]
            rest = cut_at(inner, head)
            return None if rest is None else stored[:index] + rest
    return None


# ---- choosing what to summarize ----------------------------------------------------------------
def pick_thread(target: Checkpoint, key: str | None) -> str:
    """The thread to summarize: ``key``, else the one the checkpoint's actor was speaking in."""
    heads = target.threads
    if key is not None:
        if key not in heads:
            raise UsageError(
                f"thread {key!r} did not exist at {target.id}",
                hint="threads there: " + (", ".join(sorted(heads)) or "none"),
            )
        return key
    if not heads:
        raise UsageError(f"checkpoint {target.id} has no conversation to summarize")
    actor = target.actor or ""
    ranked = [
        k
        for k in sorted(heads)
        if (not actor or actor in k) and (not target.task_id or target.task_id in k)
    ]
    if len(ranked) == 1:
        return ranked[0]
    candidates = ranked or sorted(heads)
    if len(candidates) == 1:
        return candidates[0]
    raise UsageError(
        f"checkpoint {target.id} has several threads; say which with --thread",
        hint="threads there: " + ", ".join(candidates),
    )


def _is_tool(message: StoredMessage) -> bool:
    return message.message.get("role") == "tool"


def split_thread(
    stored: list[StoredMessage], head: str | None, direction: str
) -> tuple[list[StoredMessage], list[StoredMessage], list[StoredMessage]]:
    """``(before, slice, after)``: the slice is what the summary replaces.

    Boundaries move past tool results so no assistant tool call loses its answer (providers
    reject such threads), and a leading system prompt is never summarized.
    """
    if direction not in DIRECTIONS:
        raise UsageError(f"--direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
    if head is None:
        cut = 0
    else:
        index = next((i for i, m in enumerate(stored) if m.id == head), None)
        if index is None:
            raise UsageError(
                f"the checkpoint's last message {head} is no longer in the thread",
                hint="it was summarized already; pick a later checkpoint",
            )
        cut = index + 1
    while cut < len(stored) and _is_tool(stored[cut]):
        cut += 1
    start = 0
    while start < len(stored) and stored[start].message.get("role") == "system":
        start += 1
    if direction == "up-to":
        return stored[:start], stored[start:cut], stored[cut:]
    return stored[:cut], stored[cut:], []


def _transcript(messages: list[StoredMessage], max_chars: int | None = None) -> str:
    cap = _TRANSCRIPT_CAP
    if max_chars is not None and messages:
        cap = max(200, min(cap, max_chars // len(messages)))
    parts = []
    for stored in messages:
        message = stored.message
        role = str(message.get("role", "?"))
        text = message.get("content")
        body = text if isinstance(text, str) else ("" if text is None else str(text))
        for call in message.get("tool_calls") or []:
            function = call.get("function", {}) if isinstance(call, dict) else {}
            body += f"\n[tool call {function.get('name')}: {function.get('arguments')}]"
        if len(body) > cap:
            body = body[:cap] + f"... [{len(body)} chars]"
        parts.append(f"--- {role} ({stored.id})\n{body}")
    return "\n".join(parts)


@dataclass(frozen=True)
class SummaryPlan:
    """What a summarize would replace (nothing written, no model called)."""

    thread: str
    replaced: list[str]
    direction: str
    checkpoint: str

    def render(self) -> str:
        return (
            f"summarize {len(self.replaced)} message(s) {self.direction} {self.checkpoint} "
            f"in thread {self.thread} into one model-written summary"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "thread": self.thread,
            "replaced": self.replaced,
            "direction": self.direction,
            "checkpoint": self.checkpoint,
        }


def plan_summary(
    session: Session, target: Checkpoint, direction: str, *, thread_key: str | None = None
) -> SummaryPlan:
    """Which messages ``summarize`` would replace (``tilth summarize --dry-run``)."""
    key = pick_thread(target, thread_key)
    stored = session.threads.get(key).read()
    _, chosen, _ = split_thread(stored, target.threads.get(key), direction)
    if not chosen:
        raise UsageError(
            f"nothing to summarize {direction} {target.id} in thread {key}",
            hint="the other --direction may be what you meant",
        )
    return SummaryPlan(key, [m.id for m in chosen], direction, target.id)


# ---- doing it ---------------------------------------------------------------------------------
def summarize(
    session: Session,
    target: Checkpoint,
    direction: str,
    model: Model,
    *,
    thread_key: str | None = None,
) -> SummaryResult:
    """Replace the chosen slice of a thread with ``model``'s summary; logs ``summarize``."""
    key = pick_thread(target, thread_key)
    thread = session.threads.get(key)
    stored = thread.read()
    before, chosen, after = split_thread(stored, target.threads.get(key), direction)
    if not chosen:
        raise UsageError(
            f"nothing to summarize {direction} {target.id} in thread {key}",
            hint="the other --direction may be what you meant",
        )
    return summarize_span(session, thread, (before, chosen, after), direction, model, target.id)


def summarize_span(
    session: Session,
    thread: Thread,
    parts: tuple[list[StoredMessage], list[StoredMessage], list[StoredMessage]],
    direction: str,
    model: Model,
    checkpoint: str | None,
    *,
    max_chars: int | None = None,
    on_retry: RetryHook | None = None,
    asker: Asker | None = None,
    **logged: Any,
) -> SummaryResult:
    """Replace ``parts``' middle with ``model``'s summary; logs ``model_call`` and ``summarize``.

    ``max_chars`` bounds the transcript the summarizer reads (a small context window);
    ``asker`` sends the request (default: a plain ``ask`` of ``model``, told ``on_retry``);
    ``logged`` is added to the ``summarize`` event (automatic compaction says why).
    """
    before, chosen, after = parts
    request = [
        {"role": "system", "content": SUMMARY_PROMPT},
        {"role": "user", "content": _transcript(chosen, max_chars)},
    ]
    turn = (asker or _plain_asker(session, model, on_retry))(request)
    text = (turn.content or "").strip()
    if not text:
        raise ModelError("the summarizer returned an empty summary; the thread was not changed")
    stored = thread.read()
    summary = _new_message(thread, stored, text, chosen, direction)
    thread.rewrite([*before, summary, *after] if direction == "up-to" else [*before, summary])
    replaced = [m.id for m in chosen]
    session.log(
        "summarize",
        checkpoint=checkpoint,
        thread=thread.key,
        direction=direction,
        summary_id=summary.id,
        summary_of=replaced,
        model=model.name,
        **logged,
    )
    return SummaryResult(thread.key, summary, replaced, direction)


def _plain_asker(session: Session, model: Model, on_retry: RetryHook | None) -> Asker:
    """``tilth summarize``'s request: no turn in flight, so no cancel token nor deadline."""

    def asker(request: list[dict[str, Any]]) -> AssistantTurn:
        turn = ask(model, request, [], on_retry=on_retry)
        session.log(
            "model_call",
            actor="summarizer",
            model=model.name,
            prompt_tokens=turn.usage.prompt_tokens,
            completion_tokens=turn.usage.completion_tokens,
            tokens_used_total=session.add_tokens(turn.usage.total),
            finish_reason=turn.finish_reason,
        )
        return turn

    return asker


def _new_message(
    thread: Thread,
    stored: list[StoredMessage],
    text: str,
    chosen: list[StoredMessage],
    direction: str,
) -> StoredMessage:
    """The summary with the thread's next id (ids are never reused)."""
    from tilth.session.threads import message_number

    floor = 0
    try:
        floor = int((thread.directory / f"{thread.key}.next").read_text().strip())
    except (OSError, ValueError):
        pass
    number = max([floor, *(message_number(m.id) for m in stored)]) + 1
    where = "earlier" if direction == "up-to" else "later"
    content = f"[Summary of {len(chosen)} {where} message(s), written by the summarizer]\n{text}"
    return StoredMessage(
        f"{thread.key}#{number}",
        {"role": "user", "content": content},
        {
            "kind": "summary",
            "summary_of": [m.id for m in chosen],
            "replaced": [{"id": m.id, "message": m.message, "meta": m.meta} for m in chosen],
        },
    )
