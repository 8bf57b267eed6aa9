"""How ``chat.html`` shows a tool call's arguments: a command, a path, a diff, a case."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tilth.ui.visualize.html import bullets, collapsible, esc, kv, pre, text_block, to_json


def render_args(tool: str, args: Any) -> str:
    """HTML for ``args`` of a call to ``tool`` (pretty JSON when the shape is unexpected)."""
    if not isinstance(args, dict):
        return pre(args if isinstance(args, str) else to_json(args))
    if "unparseable" in args:
        return '<div class="meta">arguments were not valid JSON:</div>' + pre(args["unparseable"])
    shower = _SHOWERS.get(tool)
    if shower is None:
        return pre(to_json(args))
    try:
        return shower(args)
    except (TypeError, AttributeError, KeyError):  # a shape we did not expect: still show it
        return pre(to_json(args))


def _bash(args: dict[str, Any]) -> str:
    return pre(f"$ {args.get('command', '')}", "cmd")


def _path(args: dict[str, Any]) -> str:
    return f"<div><code>{esc(args.get('path', '?'))}</code></div>"


def _write(args: dict[str, Any]) -> str:
    content = str(args.get("content", ""))
    return _path(args) + collapsible(f"content ({len(content)} chars)", pre(content))


def _edit(args: dict[str, Any]) -> str:
    return (
        _path(args)
        + '<div class="meta">replace</div>'
        + pre(args.get("old_string", ""), "old")
        + '<div class="meta">with</div>'
        + pre(args.get("new_string", ""), "new")
    )


def _search(args: dict[str, Any]) -> str:
    return kv([("pattern", args.get("pattern")), ("in files", args.get("path_glob"))])


def render_case(case: dict[str, Any]) -> str:
    """The worker's ``submit_case`` claim: summary, criteria coverage, caveats."""
    body = text_block(case["summary"]) if case.get("summary") else ""
    coverage = case.get("ac_coverage")
    if isinstance(coverage, list) and coverage:
        rows = []
        for item in coverage:
            if isinstance(item, dict):
                cells = (
                    item.get("criterion", ""),
                    item.get("addressed_by", ""),
                    item.get("evidence", ""),
                )
            else:
                cells = (item, "", "")
            rows.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
        body += (
            "<table><tr><th>criterion</th><th>addressed by</th><th>evidence</th></tr>"
            + "".join(rows)
            + "</table>"
        )
    for key, label in (("work_arounds", "work-arounds"), ("uncertainties", "uncertainties")):
        items = case.get(key)
        if isinstance(items, list) and items:
            body += f'<div class="meta">{esc(label)}</div>' + bullets(
                to_json(i) if isinstance(i, dict) else i for i in items
            )
        elif isinstance(items, str) and items.strip():
            body += f'<div class="meta">{esc(label)}</div>' + text_block(items)
    return body or pre(to_json(case))


def _verdict(args: dict[str, Any]) -> str:
    return kv(
        [
            ("verdict", args.get("verdict")),
            ("category", args.get("rejection_category")),
            ("concern", args.get("concern")),
            ("evidence", args.get("evidence")),
            ("next step", args.get("next_step")),
        ]
    )


def _ask_user(args: dict[str, Any]) -> str:
    return text_block(args.get("question", "")) + bullets(args.get("options") or [])


def _write_seed(args: dict[str, Any]) -> str:
    entries = args.get("prd_entries") or []
    tasks = [f"{e.get('id', '?')}: {e.get('title', '')}" for e in entries if isinstance(e, dict)]
    files = args.get("test_files") or {}
    body = text_block(args["tldr"]) if args.get("tldr") else ""
    body += '<div class="meta">tasks</div>' + bullets(tasks) if tasks else ""
    if isinstance(files, dict) and files:
        body += '<div class="meta">test files</div>' + "".join(
            collapsible(str(name), pre(content)) for name, content in files.items()
        )
    return body or pre(to_json(args))


def _markdown_field(name: str) -> Callable[[dict[str, Any]], str]:
    """Stage submissions carry one Markdown text; show it as written."""

    def show(args: dict[str, Any]) -> str:
        return text_block(args.get(name, ""))

    return show


_SHOWERS = {
    "bash": _bash,
    "read_file": _path,
    "write_file": _write,
    "edit_file": _edit,
    "glob": _search,
    "grep": _search,
    "submit_case": render_case,
    "submit_verdict": _verdict,
    "ask_user": _ask_user,
    "write_seed": _write_seed,
    "submit_plan": _markdown_field("plan"),
    "submit_brainstorm": _markdown_field("content"),
}
