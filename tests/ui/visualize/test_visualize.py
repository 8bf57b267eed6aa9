"""``chat.html``: every event type rendered for what it is, untrusted text always escaped."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tilth.session.files import atomic_write_json
from tilth.session.store import Session
from tilth.timeline.record.checkpoints import (
    Checkpoint,
    checkpoint_id,
    checkpoints_dir,
    write_checkpoint,
)
from tilth.ui.visualize.page import render_session_html, write_chat_html

XSS = "<script>alert(1)</script>"
XSS_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


@pytest.fixture
def session(tmp_path: Path) -> Session:
    return Session.create(tmp_path / "sessions", tmp_path / "repo")


def cards(page: str, type_: str) -> list[str]:
    """The HTML of every card for events of ``type_``."""
    pattern = rf'<div class="card [^"]*"[^>]*data-type="{re.escape(type_)}">.*?</div>(?=\n|$)'
    return re.findall(pattern, page, re.DOTALL)


def header_of(page: str) -> str:
    return page.split('<header class="top">')[1].split("</header>")[0]


# (type, payload, what the card must show)
EVENTS: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "session_start",
        {"source": "/src/repo", "phase": "run", "branch": "session/x"},
        ["session started · run", "/src/repo", "session/x"],
    ),
    (
        "session_prepared",
        {
            "prd_entries": 3,
            "test_files": 4,
            "tokens_used": 12345,
            "interviewer_model": "m-interview",
        },
        ["seed prepared", "3 tasks · 4 tests · 12,345 tokens · m-interview"],
    ),
    (
        "seed_committed",
        {"sha": "abcdef1234567890", "branch": "session/x"},
        ["seed committed · abcdef1234", "session/x"],
    ),
    (
        "session_resume",
        {
            "plan": "retry T-002",
            "last_stop": "iter_cap",
            "retried": ["T-002"],
            "pending": ["T-002", "T-003"],
            "unwound_commit": True,
        },
        [
            "session resumed",
            "retry T-002",
            "iter_cap",
            "T-002, T-003",
            "unwound FAILED commit",
            "yes",
        ],
    ),
    (
        "model_call",
        {
            "actor": "worker",
            "turn": 3,
            "model": "m1",
            "prompt_tokens": 1200,
            "completion_tokens": 80,
            "tokens_used_total": 5000,
            "finish_reason": "tool_calls",
            "content": "Let me look.",
            "reasoning": "think hard",
            "tool_calls": ["read_file"],
        },
        [
            "model call",
            "prompt 1,200 · completion 80",
            "session total 5,000",
            "Let me look.",
            '<details class="reasoning"><summary>reasoning (10 chars)',
            "think hard",
            "asked for: read_file",
            "worker · turn 3",
        ],
    ),
    (
        "model_retry",
        {"attempt_no": 2, "error": "HTTP 429", "delay": 4},
        ["model call retried", "HTTP 429", "4s"],
    ),
    (
        "tool_call",
        {"tool": "bash", "args": {"command": "pytest -q"}},
        ["tool call · bash", "$ pytest -q"],
    ),
    (
        "tool_result",
        {"tool": "bash", "result_preview": "3 passed", "result_chars": 900},
        ["result · bash", "3 passed", "900 chars (truncated)"],
    ),
    (
        "tool_blocked",
        {"tool": "bash", "reason": "force push", "command": "git push -f"},
        ["BLOCKED · bash", "force push", "git push -f"],
    ),
    (
        "empty_model_response",
        {"streak": 2, "finish_reason": "stop"},
        ["empty model response", "streak", "2"],
    ),
    (
        "nudge",
        {"text": "Call submit_case when done.", "count": 1},
        ["nudge #1", "Call submit_case when done."],
    ),
    (
        "case_submitted",
        {
            "summary": "Added parser",
            "ac_coverage": [{"criterion": "parses dates", "addressed_by": "src/p.py::parse"}],
            "uncertainties": ["timezone"],
        },
        ["case submitted", "Added parser", "<td>parses dates</td>", "src/p.py::parse", "timezone"],
    ),
    (
        "case_rejected",
        {"reason": "ac_coverage missing", "errors": ["criterion 2 unmapped"]},
        ["case rejected", "ac_coverage missing", "criterion 2 unmapped"],
    ),
    (
        "tests_run",
        {"passed": False, "command": "pytest tests/test_t001_x.py", "output": "1 failed"},
        ["tests failed", "pytest tests/test_t001_x.py", "1 failed", "<details open>"],
    ),
    (
        "evaluator_verdict",
        {
            "verdict": "reject",
            "rejection_category": "weak_test",
            "concern": "Only the happy path.",
            "evidence": ["tests/a.py:3"],
            "next_step": "Test empty input.",
        },
        [
            "evaluator rejects · weak_test",
            "Only the happy path.",
            "tests/a.py:3",
            "Next step:",
            "Test empty input.",
            "card evaluator bad",
        ],
    ),
    (
        "ledger_appended",
        {"verdict_summary": "reject:weak_test", "entries": 2},
        ["ledger · reject:weak_test", "entries for this task"],
    ),
    (
        "task_start",
        {"task_id": "T-001", "title": "Parse dates", "tier": "L2"},
        ["task started · T-001", "Parse dates", "L2"],
    ),
    (
        "task_done",
        {"task_id": "T-001", "summary": "parser done"},
        ["task done · T-001", "parser done"],
    ),
    (
        "task_failed",
        {"task_id": "T-001", "reason": "iter_cap"},
        ["task failed · iter_cap", "card bad"],
    ),
    (
        "stage_started",
        {"task_id": "T-001", "stage": "implement"},
        ["stage started · implement", "T-001"],
    ),
    (
        "stage_completed",
        {"task_id": "T-001", "stage": "plan", "sha": "0123456789abcdef"},
        ["stage completed · plan", "0123456789", "T-001"],
    ),
    (
        "commit",
        {"task_id": "T-001", "sha": "feedface00112233", "message": "T-001: parse"},
        ["committed · feedface", "T-001: parse"],
    ),
    (
        "stop",
        {"reason": "token_cap", "detail": "over TILTH_MAX_TOKENS", "error": "over budget"},
        ["stop · token_cap", "over TILTH_MAX_TOKENS", "over budget", "card bad"],
    ),
    (
        "checkpoint",
        {"id": "cp-0007", "label": "before edit", "files": 3},
        ["checkpoint · cp-0007 · before edit", "files captured"],
    ),
    (
        "rewind",
        {
            "to": "cp-0003",
            "scope": "both",
            "op": "op-1",
            "dropped": {
                "files": 2,
                "commits_dropped": 1,
                "events_dropped": 9,
                "tasks": {"T-002": "pending"},
                "stashed": False,
            },
        },
        [
            "rewind to cp-0003 · both",
            "files 2 · commits dropped 1 · events dropped 9",
            "tasks T-002 → pending",
        ],
    ),
    (
        "restart",
        {"task_id": "T-002", "from": "implementing", "to": "cp-0005", "head": "a1b2c3d4e5f6a7"},
        ["restart · T-002 from implementing", "cp-0005", "a1b2c3d4e5"],
    ),
    (
        "fork",
        {
            "new_session": "20260101-000000-abcdef",
            "from_session": "20251231-000000-aaaaaa",
            "at": "cp-0002",
        },
        ["fork → 20260101-000000-abcdef", "20251231-000000-aaaaaa", "cp-0002"],
    ),
    (
        "reset_to_seed",
        {"seed_sha": "5eed5eed5eed", "deleted": ["ledger/", "progress.txt"]},
        ["reset to seed", "5eed5eed5e", "progress.txt"],
    ),
    (
        "tests_run",
        {
            "passed": True,
            "files": ["tests/test_t001_dates.py"],
            "checks": [{"name": "seed tests", "passed": True, "command": "pytest -q x.py"}],
            "output_preview": "[seed tests] PASS",
        },
        ["tests passed", "✓ seed tests", "pytest -q x.py", "[seed tests] PASS", "card ok"],
    ),
    (
        "prompt_assembled",
        {"role": "evaluator", "chars": 20000, "content": "Review T-001", "truncated": True},
        ["prompt assembled · evaluator", "20,000 chars, truncated", "Review T-001"],
    ),
    ("feedback_delivered", {"chars": 321}, ["feedback delivered to the worker · 321 chars"]),
    ("task_retry", {"previous_failure": {"reason": "iter_cap"}}, ["task retried", "iter_cap"]),
    ("interview_nudge", {"actor": "interviewer", "turn": 2}, ["nudge", "without calling a tool"]),
    ("seed_rejected", {"error": "T-1 is not a task id"}, ["seed rejected", "T-1 is not"]),
    (
        "evaluator_parse_error",
        {"attempt": 1, "error": "no submit_verdict", "raw_tool_calls": [{"name": "x"}]},
        ["evaluator reply could not be parsed", "no submit_verdict", "what the model sent"],
    ),
    ("case_parse_error", {"error": "summary missing"}, ["case could not be parsed"]),
    (
        "model_retry",
        {"role": "worker", "attempt": 1, "reason": "HTTP 503", "delay": 1.25},
        ["model call retried", "HTTP 503", "1.2s", "worker · attempt 1"],
    ),
    (
        "tool_call",
        {"tool": "submit_plan", "args": {"plan": "1. add parser\n2. test it"}},
        ["tool call · submit_plan", '<div class="text">1. add parser\n2. test it</div>'],
    ),
    (
        "stage_rejected",
        {
            "task_id": "T-001",
            "stage": "code_review",
            "back_to": "implementing",
            "rejections": 1,
            "verdict_summary": "reject:acceptance_gap",
        },
        ["stage rejected · code_review → back to implementing", "reject:acceptance_gap"],
    ),
    (
        "task_attempt_failed",
        {
            "task_id": "T-001",
            "stage": "implementing",
            "reason": "iter_cap",
            "detail": "32 turns without a case",
        },
        ["task attempt failed · iter_cap", "32 turns without a case"],
    ),
    (
        "summarize",
        {
            "direction": "up-to",
            "thread": "worker-T-001",
            "at": "cp-0004",
            "summary": "Earlier work: parser.",
        },
        ["summarized · up-to", "worker-T-001", "Earlier work: parser."],
    ),
]


@pytest.mark.parametrize(("type_", "payload", "expected"), EVENTS, ids=[e[0] for e in EVENTS])
def test_every_event_type_has_its_own_card(
    session: Session, type_: str, payload: dict[str, Any], expected: list[str]
) -> None:
    session.log(type_, **payload)
    page = render_session_html(session)
    found = cards(page, type_)
    assert len(found) == 1, f"no card for {type_}"
    card = found[0]
    assert "unknown" not in card.split(">", 1)[0], f"{type_} fell through to the fallback"
    for text in expected:
        assert text in card, f"{type_}: {text!r} missing from {card}"


def test_unknown_event_type_gets_a_readable_fallback(session: Session) -> None:
    session.log("mystery_event", detail="something odd", count=3)
    card = cards(render_session_html(session), "mystery_event")[0]
    assert 'class="card unknown"' in card
    assert "mystery_event" in card
    assert "<dt>detail</dt><dd>something odd</dd>" in card


def test_unused_payload_fields_are_still_shown(session: Session) -> None:
    session.log("commit", sha="abc12345", novel_field="kept visible")
    card = cards(render_session_html(session), "commit")[0]
    assert "more fields" in card and "kept visible" in card


def test_untrusted_text_is_escaped_everywhere(session: Session) -> None:
    session.save_prd(
        [
            {
                "id": "T-001",
                "title": XSS,
                "description": "d",
                "acceptance_criteria": [XSS],
                "status": "pending",
            }
        ]
    )
    atomic_write_json(
        session.seed_meta_path,
        {"tldr": XSS, "open_questions": [XSS], "blockers": [XSS], "scope_notes": XSS},
    )
    session.ledger.append("T-001", {"verdict": "reject", "concern": XSS, "next_step": XSS})
    session.log(
        "model_call", task_id="T-001", content=XSS, reasoning=XSS, model=XSS, scripted=False
    )
    session.log("tool_call", task_id="T-001", tool="bash", args={"command": XSS})
    session.log("tool_call", task_id="T-001", tool="write_file", args={"path": XSS, "content": XSS})
    session.log("tool_call", task_id="T-001", tool=XSS, args={XSS: XSS})
    session.log("tool_result", task_id="T-001", tool="bash", result_preview=XSS)
    session.log(
        "evaluator_verdict",
        task_id="T-001",
        verdict="reject",
        rejection_category=XSS,
        concern=XSS,
        evidence=[XSS],
        next_step=XSS,
    )
    session.log("</script><script>alert(2)</script>", note=XSS)
    page = render_session_html(session)
    assert XSS not in page
    assert "alert(2)</script>" not in page
    assert page.count(XSS_ESCAPED) >= 15
    # Exactly the page's own two script elements: the JSON data and the inline script.
    assert page.count("<script") == 2


def test_page_is_self_contained(session: Session) -> None:
    session.log("tool_call", tool="bash", args={"command": "curl https://example.com"})
    page = render_session_html(session)
    assert "<link" not in page
    assert not re.search(r"\s(src|href)=", page)
    assert "@import" not in page
    assert "prefers-color-scheme: dark" in page
    assert "Content-Security-Policy" in page


def test_header_shows_id_status_tokens_events_and_scripted_model(session: Session) -> None:
    session.update_checkpoint(status="all_done", tokens_used=123456)
    session.log("model_call", model="scripted-worker", scripted=True, prompt_tokens=1)
    session.log("stop", reason="all_done")
    page = render_session_html(session)
    header = header_of(page)
    assert session.id in header
    assert "all_done" in header
    assert "123,456" in header
    assert "<b>2</b> events" in header
    assert re.search(r"model: <span class=\"badge scripted\">scripted</span>", header)
    assert f"<title>tilth · {session.id}</title>" in page


def test_header_names_real_models_and_never_says_scripted(session: Session) -> None:
    session.log("model_call", model="gpt-real", scripted=False)
    header = header_of(render_session_html(session))
    assert "gpt-real" in header
    assert "scripted" not in header


def test_seed_panel_task_overview_and_ledger(session: Session) -> None:
    atomic_write_json(
        session.seed_meta_path,
        {
            "interviewer_model": "m-seed",
            "tokens": 4321,
            "started_at": "t0",
            "ended_at": "t1",
            "tldr": "Add a date parser.",
            "open_questions": ["Which formats?"],
            "blockers": ["Spec says both UTC and local"],
            "scope_notes": "No CLI changes.",
        },
    )
    session.save_prd(
        [
            {"id": "T-001", "title": "Parser", "status": "done", "acceptance_criteria": ["a"]},
            {"id": "T-002", "title": "Docs", "status": "failed", "acceptance_criteria": ["b"]},
            {"id": "T-003", "title": "Polish", "status": "pending", "acceptance_criteria": ["c"]},
        ]
    )
    session.ledger.append(
        "T-002",
        {
            "verdict": "reject",
            "rejection_category": "weak_test",
            "concern": "no edge cases",
            "next_step": "add them",
        },
    )
    session.ledger.append(
        "T-002",
        {
            "stage": "implementing",
            "turn": 7,
            "diff_summary": "src/docs.py | 4 ++--",
            "verdict": {"verdict": "accept", "concern": "fine now", "evidence": []},
        },
    )
    page = render_session_html(session)
    seed = page.split('<section class="panel seed">')[1].split("</section>")[0]
    assert "m-seed · 4,321 tokens · t0 → t1" in seed
    assert "Add a date parser." in seed and "Which formats?" in seed
    assert '<div class="blockers">' in seed and "Spec says both UTC and local" in seed
    assert "No CLI changes." in seed
    tasks = page.split('<section class="panel tasks">')[1].split("</section>")[0]
    assert "Tasks · 1/3 done" in tasks
    for status in ("done", "failed", "pending"):
        assert f'class="status-{status}">{status}<' in tasks
    ledger = page.split('<section class="panel ledger">')[1].split("</section>")[0]
    assert "T-002 · 2 verdict(s)" in ledger
    assert "no edge cases" in ledger and "next: add them" in ledger and "fine now" in ledger
    assert (
        "stage implementing · turn 2 · after worker turn 7" in ledger
        and "src/docs.py | 4 ++--" in ledger
    )
    assert '<span class="badge ok">accept</span>' in ledger
    assert "T-001" not in ledger


def test_panels_absent_without_their_files(session: Session) -> None:
    page = render_session_html(session)
    assert 'class="panel' not in page
    assert "No events recorded yet." in page


def test_task_dividers_mark_each_change_of_task(session: Session) -> None:
    session.save_prd([{"id": "T-001", "title": "First"}, {"id": "T-002", "title": "Second"}])
    session.log("session_start", phase="run")
    for task in ("T-001", "T-001", "T-002"):
        session.log("task_start", task_id=task)
    session.log("stop", reason="all_done")
    session.log("task_start", task_id="T-001")
    page = render_session_html(session)
    dividers = re.findall(r'<div class="divider" id="task-(T-\d+)">', page)
    assert dividers == ["T-001", "T-002", "T-001"]
    assert "T-001 · First</div>" in page
    assert page.index("task-T-002") < page.index('data-type="stop"')


def test_torn_last_line_is_tolerated(session: Session) -> None:
    session.log("session_start", phase="run")
    session.log("task_start", task_id="T-001")
    with open(session.events.path, "ab") as handle:
        handle.write(b'{"v": 1, "seq": 3, "type": "model_ca')
    page = render_session_html(session)
    assert "<b>2</b> events" in page
    assert "torn last line" in page
    assert 'data-type="task_start"' in page


def test_api_keys_never_reach_the_page(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILTH_API_KEY", "sk-test-visualize-secret")
    session.log("tool_result", tool="bash", result_preview="key is sk-test-visualize-secret")
    page = render_session_html(session)
    assert "sk-test-visualize-secret" not in page
    assert "[redacted]" in page


def test_write_chat_html_replaces_the_file_atomically(session: Session) -> None:
    session.log("stop", reason="all_done")
    path = write_chat_html(session)
    assert path == session.dir / "chat.html"
    first = path.read_text()
    assert 'data-type="stop"' in first
    session.log("commit", sha="abcdef12")
    write_chat_html(session)
    assert 'data-type="commit"' in path.read_text()
    assert [p.name for p in session.dir.iterdir() if p.name.startswith(".chat.html")] == []


def _checkpoint(seq: int, event_seq: int, label: str, **extra: Any) -> Checkpoint:
    return Checkpoint(
        id=checkpoint_id(seq),
        seq=seq,
        kind=extra.pop("kind", "turn"),
        ts="2026-01-01T00:00:00Z",
        label=label,
        task_id=extra.pop("task_id", None),
        stage=None,
        turn=None,
        actor=None,
        head="0" * 40,
        event_offset=0,
        event_seq=event_seq,
        state={},
        threads={},
        **extra,
    )


def test_checkpoints_are_marked_where_they_were_taken(session: Session) -> None:
    session.log("session_start", phase="run")
    session.log("task_start", task_id="T-001")
    session.log("stop", reason="all_done")
    write_checkpoint(session, _checkpoint(1, 0, "seed", kind="seed"))
    write_checkpoint(
        session,
        _checkpoint(2, 2, XSS, task_id="T-001", files_changed=["a.py", "b.py"], gaps=["big.bin"]),
    )
    (checkpoints_dir(session) / "cp-0003.json").write_text("{torn")
    page = render_session_html(session)
    order = [m.group(1) for m in re.finditer(r'id="(cp-\d+|e\d+)"', page)]
    assert order == ["cp-0001", "e1", "e2", "cp-0002", "e3"]
    marker = page.split('id="cp-0002"')[1].split("</div>")[0]
    assert XSS_ESCAPED in marker and "2 file(s) changed" in marker
    assert "tilth rewind --to cp-0002" in marker
    assert "not captured: big.bin" in page
    assert "cp-0003.json: unreadable" in page
    assert "<b>2</b> checkpoints" in header_of(page)


class _TagBalance(HTMLParser):
    """Records every end tag that does not close the innermost open element."""

    VOID = frozenset({"meta", "br", "input", "hr", "img", "link"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self.stack and self.stack[-1] == tag:
            self.stack.pop()
        else:
            self.errors.append(f"</{tag}> at {self.getpos()} inside {self.stack[-3:]}")


def test_page_with_every_event_is_well_formed(session: Session) -> None:
    atomic_write_json(session.seed_meta_path, {"tldr": "t", "open_questions": ["q"]})
    session.save_prd([{"id": "T-001", "title": "x", "acceptance_criteria": ["a"]}])
    session.ledger.append("T-001", {"verdict": {"verdict": "accept", "concern": "ok"}})
    for type_, payload, _ in EVENTS:
        session.log(type_, **{"task_id": "T-001", **payload})
    session.log("mystery_event", nested={"a": [1, 2]})
    write_checkpoint(session, _checkpoint(1, 3, "turn 1"))
    parser = _TagBalance()
    parser.feed(render_session_html(session))
    assert parser.errors == []
    assert parser.stack == []


def test_huge_blocks_are_clipped(session: Session) -> None:
    content = "A" * 150_000
    session.log("tool_call", tool="write_file", args={"path": "big.txt", "content": content})
    page = render_session_html(session)
    assert "A" * 20_000 in page
    assert "A" * 20_001 not in page
    assert "130,000 more chars not shown" in page
