"""Renderers for review, task, stage, commit and timeline events in ``chat.html``."""

from __future__ import annotations

from tilth.ui.visualize.cards import Card, renders
from tilth.ui.visualize.html import (
    Fields,
    bullets,
    collapsible,
    esc,
    kv,
    pre,
    text_block,
    to_json,
)
from tilth.ui.visualize.tools import render_args


# ---- review: case, tests, verdicts -----------------------------------------------------------
@renders("case_submitted")
def _case_submitted(f: Fields) -> Card:
    case = f.get("case")
    source = case if isinstance(case, dict) else f.payload
    f.used.update(("summary", "ac_coverage", "work_arounds", "uncertainties"))
    return Card("review", "agent ok", "case submitted", render_args("submit_case", source))


@renders("case_rejected", "case_parse_error", "seed_rejected", "evaluator_parse_error")
def _case_rejected(f: Fields) -> Card:
    reasons = f.items("errors", "reasons", "problems")
    reason = f.text("reason", "error", "message")
    body = (text_block(reason) if reason else "") + bullets(reasons)
    feedback = f.text("feedback")
    if feedback:
        body += collapsible("feedback sent to the worker", pre(feedback))
    raw = f.get("raw_tool_calls")
    if raw:
        body += collapsible("what the model sent", pre(to_json(raw)))
    title = {
        "case_parse_error": "case could not be parsed",
        "seed_rejected": "seed rejected",
        "evaluator_parse_error": "evaluator reply could not be parsed",
    }.get(f.event_type, "case rejected")
    return Card("review", "bad", title, body)


@renders("tests_run", "validator_run")
def _tests_run(f: Fields) -> Card:
    passed = f.get("passed", "ok")
    state = "passed" if passed else "failed"
    counts = kv(
        [
            ("command", f.get("command")),
            ("files", f.items("files", "test_files")),
            ("exit code", f.get("returncode", "exit_code")),
            ("duration", f.get("duration", "seconds")),
        ]
    )
    results = f.get("checks", "results")
    listing = ""
    if isinstance(results, list):
        listing = (
            "<ul>"
            + "".join(
                f"<li>{'✓' if r.get('passed') else '✗'} {esc(r.get('name', '?'))}"
                + (f" <code>{esc(r['command'])}</code>" if r.get("command") else "")
                + "</li>"
                for r in results
                if isinstance(r, dict)
            )
            + "</ul>"
        )
    output = f.text("output", "output_preview", "stdout", "summary")
    body = counts + listing
    if output:
        body += collapsible(f"output ({len(output)} chars)", pre(output), open_=not passed)
    return Card("review", "ok" if passed else "bad", f"tests {state}", body)


@renders("evaluator_verdict")
def _verdict(f: Fields) -> Card:
    verdict = (f.text("verdict") or "?").lower()
    category = f.text("rejection_category", "category")
    accepted = verdict == "accept"
    title = (
        "evaluator accepts"
        if accepted
        else f"evaluator rejects{' · ' + category if category else ''}"
    )
    body = text_block(f.text("concern")) if f.text("concern") else ""
    evidence = f.items("evidence")
    if evidence:
        body += '<h4 class="meta">evidence</h4>' + bullets(evidence)
    next_step = f.text("next_step")
    if next_step:
        body += f'<div class="text"><b>Next step:</b> {esc(next_step)}</div>'
    if f.get("parse_failed"):
        body += '<div class="meta">the verdict could not be parsed; failed closed</div>'
    return Card("review", f"evaluator {'ok' if accepted else 'bad'}", title, body)


@renders("ledger_appended")
def _ledger(f: Fields) -> Card:
    summary = f.text("verdict_summary", "verdict") or "entry"
    entries = f.get("entries", "count")
    return Card(
        "review",
        "dim",
        f"ledger · {summary}",
        kv([("entries for this task", entries), ("file", f.get("path"))]),
    )


# ---- tasks, stages, commits ------------------------------------------------------------------
@renders("task_start")
def _task_start(f: Fields) -> Card:
    title = f.text("title")
    body = kv(
        [
            ("task", title),
            ("attempt", f.get("attempt_no")),
            ("tier", f.get("tier")),
            ("stages", " → ".join(str(s) for s in f.items("stages"))),
            ("base commit", _short(f.text("base_commit"))),
        ]
    )
    return Card("lifecycle", "info", f"task started · {f.payload.get('task_id', '?')}", body)


@renders("task_done")
def _task_done(f: Fields) -> Card:
    summary = f.text("summary")
    return Card(
        "lifecycle",
        "ok",
        f"task done · {f.payload.get('task_id', '?')}",
        text_block(summary) if summary else "",
    )


@renders("task_failed")
def _task_failed(f: Fields) -> Card:
    reason = f.text("reason") or "unknown"
    body = text_block(f.text("error", "message")) if f.text("error", "message") else ""
    body += kv([("placeholder commit", _short(f.text("placeholder_sha"))), *_failure_counts(f)])
    return Card("lifecycle", "bad", f"task failed · {reason}", body)


def _failure_counts(f: Fields) -> list[tuple[str, object]]:
    """The number behind a task failure's reason, as the worker loop reports it."""
    return [
        ("turns", f.get("turns")),
        ("streak", f.get("streak")),
        ("nudges", f.get("nudges")),
        ("evaluator calls", f.get("evaluator_calls")),
    ]


@renders("task_retry")
def _task_retry(f: Fields) -> Card:
    previous = f.get("previous_failure")
    shown = previous.get("reason", previous) if isinstance(previous, dict) else previous
    return Card(
        "lifecycle", "warn", "task retried", kv([("previous failure", shown)]) if shown else ""
    )


@renders("stage_started")
def _stage_started(f: Fields) -> Card:
    stage = f.payload.get("stage") or f.text("name") or "?"
    return Card(
        "lifecycle",
        "dim",
        f"stage started · {stage}",
        kv(
            [
                ("task", f.payload.get("task_id")),
                ("from", _short(f.text("base_sha", "sha"))),
                ("resumed", "yes" if f.get("resumed") else None),
            ]
        ),
    )


@renders("stage_completed")
def _stage_completed(f: Fields) -> Card:
    stage = f.payload.get("stage") or f.text("name") or "?"
    sha = f.text("sha")
    return Card(
        "lifecycle",
        "ok",
        f"stage completed · {stage}",
        kv(
            [
                ("task", f.payload.get("task_id")),
                ("commit", sha[:10] if sha else None),
                ("output", f.get("summary", "output")),
            ]
        ),
    )


@renders("stage_rejected")
def _stage_rejected(f: Fields) -> Card:
    stage = f.payload.get("stage") or "?"
    back_to = f.text("back_to")
    title = f"stage rejected · {stage}{' → back to ' + back_to if back_to else ''}"
    body = kv(
        [
            ("why", f.get("verdict_summary", "reason")),
            ("rejections so far", f.get("rejections")),
        ]
    )
    return Card("review", "bad", title, body)


@renders("task_attempt_failed", "task_stopped")
def _task_stopped(f: Fields) -> Card:
    reason = f.text("reason") or "unknown"
    detail = f.text("detail", "error")
    body = text_block(detail) if detail else ""
    body += kv(_failure_counts(f))
    return Card("lifecycle", "bad", f"task attempt failed · {reason}", body)


@renders("commit")
def _commit(f: Fields) -> Card:
    sha = f.text("sha")
    title = f"committed · {sha[:10]}" if sha else "commit · nothing to commit"
    return Card(
        "lifecycle",
        "ok" if sha else "dim",
        title,
        kv([("message", f.get("message", "subject")), ("files", f.items("files"))]),
    )


# ---- timeline --------------------------------------------------------------------------------
@renders("checkpoint")
def _checkpoint(f: Fields) -> Card:
    ident = f.text("id", "checkpoint", "checkpoint_id") or "?"
    label = f.text("label", "kind")
    return Card(
        "timeline",
        "dim",
        f"checkpoint · {ident}{' · ' + label if label else ''}",
        kv(
            [("files captured", f.get("files")), ("not captured", f.items("uncaptured", "skipped"))]
        ),
    )


@renders("rewind")
def _rewind(f: Fields) -> Card:
    target = f.text("to", "checkpoint", "target") or "?"
    scope = f.text("scope", "mode")
    return Card(
        "timeline",
        "warn",
        f"rewind to {target}{' · ' + scope if scope else ''}",
        kv(
            [
                ("files restored", f.items("files", "restored")),
                ("plan", f.get("plan")),
                ("commit", _short(f.text("head", "sha"))),
            ]
        )
        + _dropped(f),
    )


@renders("restart")
def _restart(f: Fields) -> Card:
    stage = f.text("from", "from_stage", "stage_name")
    task = f.payload.get("task_id") or f.text("task") or "?"
    title = f"restart · {task}{' from ' + stage if stage else ''}"
    body = kv(
        [
            ("back to", f.get("to")),
            ("commit", _short(f.text("head"))),
            ("reason", f.get("reason")),
            ("plan", f.get("plan")),
        ]
    )
    return Card("timeline", "warn", title, body + _dropped(f))


@renders("fork")
def _fork(f: Fields) -> Card:
    child = f.text("new_session", "child", "to_session")
    parent = f.text("from_session", "parent")
    return Card(
        "timeline",
        "info",
        f"fork{' → ' + child if child else ''}",
        kv(
            [
                ("from session", parent),
                ("at checkpoint", f.get("at", "checkpoint")),
                ("branch", f.get("branch")),
            ]
        ),
    )


@renders("reset_to_seed")
def _reset_to_seed(f: Fields) -> Card:
    sha = f.text("seed_sha", "sha")
    return Card(
        "timeline",
        "warn",
        "reset to seed",
        kv([("seed commit", _short(sha)), ("deleted", f.items("deleted"))]) + _dropped(f),
    )


@renders("summarize")
def _summarize(f: Fields) -> Card:
    direction = f.text("direction") or "?"
    body = kv(
        [
            ("thread", f.get("thread")),
            ("at", f.get("at", "checkpoint")),
            ("messages replaced", f.get("replaced", "messages")),
        ]
    )
    summary = f.text("summary")
    if summary:
        body += collapsible("summary", text_block(summary))
    return Card("timeline", "info", f"summarized · {direction}", body + _dropped(f))


def _short(sha: str | None) -> str | None:
    return sha[:10] if sha else None


def _dropped(f: Fields) -> str:
    """The counts a timeline operation recorded (``dropped``): what it threw away."""
    dropped = f.get("dropped")
    if not isinstance(dropped, dict):
        return ""
    counts = [
        f"{key.replace('_', ' ')} {value}"
        for key, value in dropped.items()
        if isinstance(value, int) and not isinstance(value, bool) and value
    ]
    tasks = dropped.get("tasks")
    if isinstance(tasks, dict) and tasks:
        counts.append("tasks " + ", ".join(f"{t} → {s}" for t, s in tasks.items()))
    if dropped.get("stashed"):
        counts.append("local changes stashed")
    return f'<div class="meta">{esc(" · ".join(counts) or "nothing changed")}</div>'
