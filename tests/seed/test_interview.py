"""The interview engine in-process, with the scripted model and a recording frontend."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from seed.support import seed_args, write_seed
from tilth.model import Script, ScriptedModel, reply, tool_call
from tilth.seed.interview import (
    MAX_TURNS,
    InterviewAbort,
    InterviewClock,
    run_interview,
    system_prompt,
)
from tilth.seed.sink import FileSeedSink
from tilth.session.store import Session


class Answers:
    """A frontend that answers from a list and remembers what it was asked and shown."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, list[str] | None]] = []
        self.summaries: list[tuple[str, list[str], list[str]]] = []
        self.tokens: list[tuple[int, int]] = []

    def ask_user(self, question: str, options: list[str] | None = None) -> str:
        self.asked.append((question, options))
        return self.answers.pop(0)

    def show_summary(self, tldr: str, open_questions: list[str], blockers: list[str]) -> None:
        self.summaries.append((tldr, open_questions, blockers))

    def update_tokens(self, prompt_total: int, completion_total: int) -> None:
        self.tokens.append((prompt_total, completion_total))


def interview(
    tmp_path: Path,
    repo: Path,
    replies: list[dict[str, Any]],
    frontend: Answers | None = None,
    clock: InterviewClock | None = None,
) -> tuple[Session, ScriptedModel, Answers, Any]:
    session = Session.create(tmp_path / "sessions", repo)
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    model = ScriptedModel(Script(replies), "scripted-prep")
    frontend = frontend or Answers()
    try:
        result: Any = run_interview(
            session=session,
            source=repo,
            model=model,
            frontend=frontend,
            sink=FileSeedSink(session.dir, worktree),
            brief="  add a thing  ",
            backoff_seconds=0,
            clock=clock,
        )
    except InterviewAbort as exc:
        result = exc
    return session, model, frontend, result


def test_prompt_ships_with_the_package() -> None:
    text = system_prompt()
    assert "write_seed" in text and "ask_user" in text and len(text) > 2000


def test_thread_tools_tokens_and_summary(tmp_path: Path, repo: Path) -> None:
    replies = [
        reply(None, tool_call("ask_user", question=" Which? ", options=["a ", "b"])),
        write_seed(1),
    ]
    session, model, frontend, result = interview(tmp_path, repo, replies, Answers("b"))
    assert result.tasks == 1 and result.test_files == ["tests/test_t001_feature_1.py"]
    assert result.tokens_used == 30 and result.turns == 2
    assert frontend.asked == [("Which?", ["a", "b"])]
    assert frontend.tokens == [(10, 5), (20, 10)]
    assert frontend.summaries == []  # prep shows it once the seed is committed
    first = model.requests[0]
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["messages"][1]["content"].endswith("One question per ask_user call.")
    assert "\nadd a thing\n" in first["messages"][1]["content"]
    names = [t["function"]["name"] for t in first["tools"]]
    assert names == ["read_file", "glob", "grep", "ask_user", "write_seed"]
    stored = session.threads.get("interviewer").read()
    assert stored[0].id == "interviewer#1"
    assert stored[-1].message["role"] == "tool"


def test_the_source_is_read_confined(tmp_path: Path, repo: Path) -> None:
    (tmp_path / "secret.txt").write_text("do not read")
    replies = [
        reply(
            None,
            tool_call("read_file", path="../secret.txt"),
            tool_call("grep", pattern="read", path_glob="../*"),
            tool_call("glob", pattern="**/*.py"),
        ),
        write_seed(1),
    ]
    _, model, _, result = interview(tmp_path, repo, replies)
    assert result.tasks == 1
    results = [m["content"] for m in model.requests[1]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("ERROR") and results[1].startswith("ERROR")
    assert all("do not read" not in r for r in results)
    assert "src/app.py" in results[2]


def test_bad_ask_user_arguments_come_back_as_errors(tmp_path: Path, repo: Path) -> None:
    replies = [
        reply(None, tool_call("ask_user", question="  ")),
        reply(None, tool_call("ask_user", question="q", options="a,b")),
        write_seed(1),
    ]
    _, model, frontend, result = interview(tmp_path, repo, replies)
    assert result.tasks == 1 and frontend.asked == []
    assert "non-empty 'question'" in model.requests[1]["messages"][-1]["content"]
    assert "list of non-empty strings" in model.requests[2]["messages"][-1]["content"]


def test_calls_after_a_written_seed_are_answered_not_run(tmp_path: Path, repo: Path) -> None:
    args = seed_args(1)
    replies = [
        reply(None, tool_call("write_seed", **args), tool_call("ask_user", question="more?")),
    ]
    session, _, frontend, result = interview(tmp_path, repo, replies)
    assert result.tasks == 1 and frontend.asked == []
    last = session.threads.get("interviewer").read()[-1].message
    assert last["content"] == "not run: the seed was already written"


def test_the_write_seed_event_previews_long_test_files(tmp_path: Path, repo: Path) -> None:
    body = "def test_long():\n" + "    assert True\n" * 40
    replies = [write_seed(1, test_files={"test_t001_long.py": body})]
    session, _, _, _ = interview(tmp_path, repo, replies)
    (call,) = [e for e in session.events.events() if e.type == "tool_call"]
    shown = call.payload["args"]["test_files"]["test_t001_long.py"]
    assert shown.startswith("def test_long():") and shown.endswith(f"[+{len(body) - 200} chars]")


def test_turn_cap(tmp_path: Path, repo: Path) -> None:
    replies = [reply(None, tool_call("glob", pattern="*.md"))] * (MAX_TURNS + 1)
    _, model, _, result = interview(tmp_path, repo, replies)
    assert isinstance(result, InterviewAbort) and result.reason == "iter_cap"
    assert len(model.requests) == MAX_TURNS
    assert f"cap of {MAX_TURNS} turns" in result.message


@pytest.mark.parametrize(("empties", "ok"), [(3, True), (4, False)])
def test_empty_responses(tmp_path: Path, repo: Path, empties: int, ok: bool) -> None:
    from tilth.model import empty

    session, _, _, result = interview(tmp_path, repo, [empty()] * empties + [write_seed(1)])
    if ok:
        assert result.tasks == 1
    else:
        assert isinstance(result, InterviewAbort) and result.reason == "empty_responses"
    streaks = [
        e.payload["streak"] for e in session.events.events() if e.type == "empty_model_response"
    ]
    assert streaks == list(range(1, empties + 1))


def test_the_wall_clock_cap_is_checked_before_each_turn(tmp_path: Path, repo: Path) -> None:
    """A cap already reached between turns stops the interview before its next request."""
    clock = InterviewClock(0.01, started=time.monotonic() - 5)
    _, model, _, result = interview(tmp_path, repo, [write_seed(1)], clock=clock)
    assert isinstance(result, InterviewAbort)
    assert result.reason == "wall_clock"
    assert "wall-clock cap [TILTH_MAX_WALL_CLOCK_MINUTES=0.01]" in result.message
    assert model.requests == []


def test_the_persons_answer_starts_the_repeat_count_afresh(tmp_path: Path, repo: Path) -> None:
    """A read that failed twice may succeed once the person has answered (they may have
    made the file): the same miss twice more after the answer does not end the interview;
    without an answer in between, the third miss does."""
    missing = reply(None, tool_call("read_file", path="NOTES.md"))
    ask = reply(None, tool_call("ask_user", question="Where are the notes?"))
    replies = [missing, missing, ask, missing, missing, write_seed(1)]
    _, _, frontend, result = interview(tmp_path, repo, replies, Answers("I added NOTES.md"))
    assert frontend.asked == [("Where are the notes?", None)]
    assert result.tasks == 1

    _, _, _, stopped = interview(tmp_path / "b", repo, [missing] * 3 + [write_seed(1)])
    assert isinstance(stopped, InterviewAbort) and "repeated the same failing" in stopped.message
