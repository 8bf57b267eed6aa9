"""SPEC §5.1 from outside: the interview, its five tools, the seed commit and the seed rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import make_repo
from tests.e2e.lab import (
    ANSWER,
    ANSWER_TEXT,
    SECRET,
    Lab,
    Live,
    bodies,
    build_project,
    git,
    tool_names,
)
from tilth.model import FakeServer, Script
from tilth.model.script import Reply, reply, tool_call

INTERVIEW_TOOLS = {"read_file", "glob", "grep", "ask_user", "write_seed"}


def _schemas(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"]["parameters"] for t in body["tools"]}


def test_interview_has_exactly_the_five_tools(lab: Lab) -> None:
    prep = lab.notes["requests"]["prep"]
    assert prep
    for body in prep:
        assert tool_names(body) == INTERVIEW_TOOLS


def test_interview_tool_schemas(lab: Lab) -> None:
    schemas = _schemas(lab.notes["requests"]["prep"][0])
    ask = schemas["ask_user"]
    assert set(ask["required"]) == {"question"}
    assert ask["properties"]["question"]["type"] == "string"
    assert ask["properties"]["options"]["type"] == "array"
    assert ask["properties"]["options"]["items"]["type"] == "string"
    seed = schemas["write_seed"]
    assert {"prd_entries", "test_files", "tldr"} <= set(seed["required"])
    assert not {"open_questions", "blockers", "scope_notes"} & set(seed["required"])
    for optional in ("open_questions", "blockers", "scope_notes"):
        assert optional in seed["properties"]
    entries = seed["properties"]["prd_entries"]
    assert entries["type"] == "array"
    assert {"id", "title", "description", "acceptance_criteria"} <= set(
        entries["items"]["required"]
    )
    assert seed["properties"]["test_files"]["type"] == "object"
    assert seed["properties"]["tldr"]["type"] == "string"
    for name in ("read_file", "glob", "grep"):
        assert schemas[name]["required"], name


def test_piped_stdin_answers_the_interview(lab: Lab) -> None:
    prep = lab.notes["requests"]["prep"]
    answers = [m["content"] for body in prep for m in body["messages"] if m.get("role") == "tool"]
    assert any(ANSWER_TEXT in str(a) for a in answers), answers
    out = lab.notes["prep"].stdout
    assert "Should slugify keep digits" in out
    assert "1) yes, keep digits" in out


def test_seed_commit_and_session_state(prepared: Live) -> None:
    sha = prepared.seed_sha()
    assert prepared.head() == sha
    message = git(prepared.worktree(), "log", "-1", "--format=%s", sha).strip()
    assert message == "seed: 2 task(s) + 2 acceptance test(s)"
    added = git(prepared.worktree(), "show", "--name-only", "--format=", sha).split()
    assert sorted(added) == ["tests/test_t001_word_count.py", "tests/test_t002_slugify.py"]
    assert prepared.record().status == "prepared"
    types = prepared.types()
    assert types.index("session_prepared") < types.index("seed_committed")
    assert types[-1] == "seed_committed"
    # the user's repository: still on main, clean, its history untouched
    assert git(prepared.proj, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert git(prepared.proj, "status", "--porcelain") == ""
    assert git(prepared.proj, "log", "--format=%s", "main").splitlines() == ["initial"]


def test_existing_session_without_flag_on_a_pipe_exits_2(prepared: Live) -> None:
    before = prepared.session_ids()
    done = prepared.cli("prep-feature", str(prepared.proj), "--brief", "another feature")
    assert done.returncode == 2, done.stdout + done.stderr
    text = done.stdout + done.stderr
    assert "--force" in text or "--keep-existing" in text
    assert prepared.sid in text
    assert prepared.session_ids() == before
    assert "Traceback" not in text


GOOD_TASK = {
    "id": "T-001",
    "title": "Answer",
    "description": "Add answer() returning 42.",
    "acceptance_criteria": ["answer() == 42"],
}
GOOD_TEST = {"test_t001_answer.py": "from answer import answer\n\n\ndef test_it():\n    assert 1\n"}
BAD_BUNDLES: list[tuple[list[Any], dict[str, str]]] = [
    ([], GOOD_TEST),
    ([{k: v for k, v in GOOD_TASK.items() if k != "description"}], GOOD_TEST),
    ([{**GOOD_TASK, "id": "T-1"}], {"test_t1_answer.py": "x = 1\n"}),
    ([GOOD_TASK, dict(GOOD_TASK)], GOOD_TEST),
    ([{**GOOD_TASK, "acceptance_criteria": []}], GOOD_TEST),
    ([GOOD_TASK], {"test_answer.py": "x = 1\n"}),
    ([GOOD_TASK], {**GOOD_TEST, "test_t002_orphan.py": "x = 1\n"}),
    ([GOOD_TASK, {**GOOD_TASK, "id": "T-002"}], GOOD_TEST),
]


def _rule_breaker(model: str, request: dict[str, Any]) -> Reply:
    """Writes each bad bundle in turn, then a good one."""
    rejected = sum(1 for m in request["messages"] if m.get("role") == "tool")
    if rejected < len(BAD_BUNDLES):
        entries, files = BAD_BUNDLES[rejected]
    else:
        entries, files = [GOOD_TASK], GOOD_TEST
    return reply(
        None, tool_call("write_seed", prd_entries=entries, test_files=files, tldr="answer")
    )


def test_seed_rules_reject_every_bad_bundle(blank: Live) -> None:
    proj = make_repo(blank.live / "proj")
    with FakeServer(Script(_rule_breaker)) as server:
        done = blank.cli(
            "prep-feature",
            str(proj),
            "--brief",
            "an answer function",
            TILTH_PREP_BASE_URL=server.base_url,
        )
        requests = [r["body"] for r in server.requests if r["body"]]
    assert done.returncode == 0, done.stdout + done.stderr
    rejections = blank.of_type("seed_rejected")
    assert len(rejections) == len(BAD_BUNDLES)
    # each rejection went back to the model as an error naming the problem
    last = requests[-1]["messages"]
    errors = [m["content"] for m in last if m.get("role") == "tool"]
    assert len(errors) == len(BAD_BUNDLES)
    assert all("write_seed rejected" in e or "ERROR" in e for e in errors), json.dumps(errors)
    assert [t["id"] for t in blank.prd()] == ["T-001"]
    seed = blank.seed_sha()
    message = git(blank.worktree(), "log", "-1", "--format=%s", seed).strip()
    assert message == "seed: 1 task(s) + 1 acceptance test(s)"


def _interview_escapes(outside: Path) -> list[dict[str, Any]]:
    secret = str(outside / "secret.txt")
    return [
        tool_call("read_file", path=secret),
        tool_call("read_file", path="../" * 12 + secret.lstrip("/")),
        tool_call("read_file", path="outside_link/secret.txt"),
        tool_call("read_file", path="../home/sessions"),
        tool_call("glob", pattern="../*"),
        tool_call("glob", pattern="outside_link/*"),
        tool_call("glob", pattern=str(outside) + "/*"),
        tool_call("grep", pattern=SECRET),
        tool_call("grep", pattern=SECRET, path_glob="../**"),
        tool_call("grep", pattern=SECRET, path_glob="outside_link/*"),
    ]


def test_interview_tools_are_confined_to_the_source_repo(blank: Live, lab: Lab) -> None:
    proj = build_project(blank.root)
    escapes = _interview_escapes(lab.script.outside)

    def nosy(model: str, request: dict[str, Any]) -> Reply:
        if not any(m.get("role") == "tool" for m in request["messages"]):
            return reply(None, *escapes, tool_call("read_file", path="AGENTS.md"))
        return reply(
            None, tool_call("write_seed", prd_entries=[GOOD_TASK], test_files=GOOD_TEST, tldr="x")
        )

    with FakeServer(Script(nosy)) as server:
        done = blank.cli(
            "prep-feature", str(proj), "--brief", "peek", TILTH_PREP_BASE_URL=server.base_url
        )
        last = [r["body"] for r in server.requests if r["body"]][-1]
    assert done.returncode == 0, done.stdout + done.stderr
    results = [str(m["content"]) for m in last["messages"] if m.get("role") == "tool"]
    assert len(results) == len(escapes) + 1
    for call, text in zip(escapes, results, strict=False):
        assert SECRET not in text, (call, text)
        # refused, or nothing found: never a listing or content from outside the repo
        assert text.startswith("ERROR") or text.strip() == "(no matches)", (call, text)
    # the legitimate read inside the repo worked
    assert "docstring" in results[len(escapes)].lower() or len(results[len(escapes)]) > 20


def test_force_discards_the_existing_session_then_preps(prepared: Live) -> None:
    old = prepared.sid
    done = prepared.cli(
        "prep-feature", str(prepared.proj), "--brief", "again", "--force", input_text=ANSWER
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ids = prepared.session_ids()
    assert len(ids) == 1 and ids[0] != old
    assert f"session/{old}" not in git(prepared.proj, "branch", "--list")
    assert old not in git(prepared.proj, "worktree", "list")
    assert prepared.checkpoint(ids[0])["status"] == "prepared"


def test_brief_and_a_free_text_answer_come_from_piped_stdin(blank: Live, lab: Lab) -> None:
    proj = build_project(blank.root)
    seen = len(bodies(lab.servers.prep))
    stdin = "Count words in textutils\n0\nletters only, please\n"
    done = blank.cli("prep-feature", str(proj), input_text=stdin)
    assert done.returncode == 0, done.stdout + done.stderr
    requests = bodies(lab.servers.prep)[seen:]
    first = json.dumps(requests[0]["messages"])
    assert "Count words in textutils" in first
    answers = [m["content"] for m in requests[-1]["messages"] if m.get("role") == "tool"]
    assert any("letters only, please" in str(a) for a in answers), answers
    assert blank.record().status == "prepared"
