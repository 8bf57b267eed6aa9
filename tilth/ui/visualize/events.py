"""Renderers for session, model and tool events in ``chat.html``."""

from __future__ import annotations

from tilth.ui.visualize.cards import Card, renders
from tilth.ui.visualize.html import (
    Fields,
    badge,
    collapsible,
    esc,
    kv,
    pre,
    text_block,
    thousands,
    to_json,
)
from tilth.ui.visualize.tools import render_args


# ---- session lifecycle ---------------------------------------------------------------------
@renders("session_start")
def _session_start(f: Fields) -> Card:
    phase = f.text("phase")
    body = kv(
        [
            ("source", f.get("source")),
            ("worktree", f.get("worktree", "workspace")),
            ("branch", f.get("branch")),
            ("parent", f.get("parent_session", "forked_from")),
        ]
    )
    return Card("lifecycle", "info", f"session started{' · ' + phase if phase else ''}", body)


@renders("session_prepared")
def _session_prepared(f: Fields) -> Card:
    tasks = f.get("prd_entries", "tasks")
    tests = f.get("test_files", "tests")
    count = len(tasks) if isinstance(tasks, list) else tasks
    n_tests = len(tests) if isinstance(tests, list | dict) else tests
    parts = [
        f"{count} tasks" if count is not None else None,
        f"{n_tests} tests" if n_tests is not None else None,
        f"{thousands(f.get('tokens_used'))} tokens" if f.get("tokens_used") is not None else None,
        f.text("interviewer_model", "model"),
    ]
    return Card("lifecycle", "ok", "seed prepared", text_block(" · ".join(p for p in parts if p)))


@renders("seed_committed")
def _seed_committed(f: Fields) -> Card:
    sha = f.text("sha") or "?"
    return Card(
        "lifecycle",
        "ok",
        f"seed committed · {sha[:10]}",
        kv([("branch", f.get("branch")), ("message", f.get("message"))]),
    )


@renders("session_resume")
def _session_resume(f: Fields) -> Card:
    unwound = f.get("unwound_commit")
    body = (text_block(f.text("plan")) if f.text("plan") else "") + kv(
        [
            ("last stop", f.get("last_stop")),
            ("retried", f.items("retried")),
            ("pending", f.items("pending")),
            ("unwound FAILED commit", None if unwound is None else ("yes" if unwound else "no")),
            ("continues", f.get("continue_task", "mid_task")),
        ]
    )
    return Card("lifecycle", "info", "session resumed", body)


@renders("sandbox")
def _sandbox(f: Fields) -> Card:
    on = bool(f.get("sandboxed"))
    title = "bash sandboxed" if on else "bash NOT sandboxed"
    body = kv([("mode", f.get("mode")), ("detail", f.get("detail"))])
    return Card("lifecycle", "info" if on else "bad", title, body)


@renders("environment")
def _environment(f: Fields) -> Card:
    body = kv([("kind", f.get("kind")), ("venv", f.get("venv")), ("command", f.get("command"))])
    return Card("lifecycle", "info", "test environment", text_block(f.text("description")) + body)


@renders("setup")
def _setup(f: Fields) -> Card:
    ok = bool(f.get("ok"))
    body = kv([("command", f.get("command")), ("why", f.get("why")), ("exit", f.get("exit_code"))])
    body += pre(f.text("output")) if f.text("output") else ""
    return Card("lifecycle", "info" if ok else "bad", "setup command", body)


@renders("seed_tests_changed")
def _seed_tests_changed(f: Fields) -> Card:
    files = ", ".join(f.items("files"))
    body = text_block(f"the worker changed seed test(s) {files}; the case was refused")
    return Card("lifecycle", "bad", "seed tests changed · refused", body)


@renders("stop")
def _stop(f: Fields) -> Card:
    reason = f.text("reason") or "unknown"
    detail = f.text("detail")
    body = text_block(detail) if detail else ""
    body += pre(f.text("error")) if f.text("error") else ""
    return Card("lifecycle", "ok" if reason == "all_done" else "bad", f"stop · {reason}", body)


# ---- model -----------------------------------------------------------------------------------
def _reasoning(f: Fields) -> str:
    details = f.get("reasoning_details")
    texts: list[str] = []
    if isinstance(details, list):
        for item in details:
            if isinstance(item, dict):
                texts.extend(str(item[k]) for k in ("text", "summary") if item.get(k))
            elif isinstance(item, str):
                texts.append(item)
    flat = f.text("reasoning")
    if not texts and flat:
        texts = [flat]
    joined = "\n\n".join(t for t in texts if t.strip())
    if not joined:
        return ""
    return collapsible(f"reasoning ({len(joined)} chars)", text_block(joined), "reasoning")


@renders("model_call")
def _model_call(f: Fields) -> Card:
    prompt = f.get("prompt_tokens")
    completion = f.get("completion_tokens", "eval_tokens")
    total = f.get("tokens_used_total")
    badges = [badge("scripted", "scripted")] if f.get("scripted") else []
    model = f.text("model")
    stats = [
        model,
        f"prompt {thousands(prompt)} · completion {thousands(completion)}"
        if prompt is not None or completion is not None
        else None,
        f"session total {thousands(total)}" if total is not None else None,
        f"finish {f.text('finish_reason')}" if f.text("finish_reason") else None,
    ]
    calls = f.items("tool_calls")
    body = f'<div class="meta">{esc(" · ".join(s for s in stats if s))}</div>'
    if f.text("content"):
        body += text_block(f.text("content"))
    body += _reasoning(f)
    if calls:
        names = [c if isinstance(c, str) else to_json(c) for c in calls]
        body += f'<div class="meta">asked for: {esc(", ".join(names))}</div>'
    return Card("model", "agent", "model call", body, badges)


@renders("model_retry")
def _model_retry(f: Fields) -> Card:
    wait = f.get("delay", "wait", "backoff", "sleep")
    if isinstance(wait, float):
        wait = round(wait, 1)
    body = kv(
        [
            ("attempt", f.get("attempt_no", "try")),
            ("why", f.get("reason", "error", "message")),
            ("status", f.get("status", "status_code")),
            ("waiting", f"{wait}s" if wait is not None else None),
        ]
    )
    return Card("model", "warn", "model call retried", body)


@renders("empty_model_response")
def _empty(f: Fields) -> Card:
    body = kv(
        [
            ("streak", f.get("streak")),
            ("finish reason", f.get("finish_reason")),
            ("backing off", f.get("backoff", "delay", "wait")),
        ]
    )
    return Card("model", "warn", "empty model response", body)


@renders("nudge", "interview_nudge")
def _nudge(f: Fields) -> Card:
    text = f.text("text", "message", "content")
    count = f.get("count", "nudges", "number", "streak")
    return Card(
        "model",
        "warn",
        f"nudge{f' #{count}' if count is not None else ''}",
        text_block(text)
        if text
        else kv([("reason", f.get("reason") or "the model answered without calling a tool")]),
    )


@renders("prompt_assembled")
def _prompt(f: Fields) -> Card:
    role = f.text("role") or "model"
    chars = f.get("chars")
    content = f.text("content") or ""
    label = f"prompt ({thousands(chars)} chars{', truncated' if f.get('truncated') else ''})"
    body = collapsible(label, pre(content)) if content else kv([("chars", chars)])
    return Card("model", "dim", f"prompt assembled · {role}", body)


@renders("feedback_delivered")
def _feedback(f: Fields) -> Card:
    chars = f.get("chars")
    text = f.text("text", "feedback")
    title = f"feedback delivered to the worker{f' · {thousands(chars)} chars' if chars else ''}"
    return Card("model", "dim", title, collapsible("feedback", pre(text)) if text else "")


# ---- tools -----------------------------------------------------------------------------------
@renders("tool_call")
def _tool_call(f: Fields) -> Card:
    tool = f.text("tool", "name") or "?"
    return Card("tools", "agent", f"tool call · {tool}", render_args(tool, f.get("args")))


@renders("tool_result")
def _tool_result(f: Fields) -> Card:
    tool = f.text("tool", "name") or "?"
    preview = f.text("result_preview", "result", "preview") or ""
    chars = f.get("result_chars")
    truncated = isinstance(chars, int) and chars > len(preview)
    label = f"{thousands(chars)} chars" if chars is not None else f"{len(preview)} chars"
    badges = [badge(label + (" (truncated)" if truncated else ""))]
    if f.get("blocked"):
        return Card("tools", "tool bad", f"BLOCKED · {tool}", pre(preview), badges)
    if f.get("is_error"):
        return Card("tools", "tool bad", f"error · {tool}", pre(preview), badges)
    return Card("tools", "tool", f"result · {tool}", pre(preview), badges)


@renders("tool_blocked", "pre_tool_block")
def _tool_blocked(f: Fields) -> Card:
    tool = f.text("tool", "name") or "bash"
    body = kv([("reason", f.get("reason")), ("command", f.get("command"))])
    preview = f.text("result_preview", "result")
    if preview:
        body += pre(preview)
    return Card("tools", "tool bad", f"BLOCKED · {tool}", body)
