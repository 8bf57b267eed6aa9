"""A model that repeats the same failing call round after round (``tilth chat``, stdin piped).

The small model of the user trial (gemma-3-270m on llama.cpp) answered each tool result
with the same ``write_file`` and the same four failing calls, for minutes. The guard warns
the model on the second identical failure, stops the turn on the third, and the chat goes on.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.chat.tty import chat_env
from tests.sessionview import SessionView
from tests.warm_cli import shared
from tilth.model import FakeServer, Script, reply, tool_call
from tilth.model.fake_server import LlamaManners
from tilth.model.script import Reply

STRICT = LlamaManners(refuse_invalid_arguments=True, refuse_unanswered_calls=True)


def looping() -> Reply:
    """One round of the trial's loop: a write that works, four reads that fail the same way."""
    write = tool_call("write_file", path="notes.txt", content="hello\n")
    reads = [tool_call("read_file", path="missing.py") for _ in range(4)]
    return reply(None, write, *reads)


def chat(
    tmp_path: Path, lines: list[str], server: FakeServer, **env: str
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "work").mkdir(exist_ok=True)
    return shared().run(
        ["chat", "work"],
        input_text="".join(line + "\n" for line in lines),
        cwd=tmp_path,
        env=chat_env(tmp_path / "home", server, **env),
        timeout=120,
    )


def test_a_repeated_failing_call_stops_the_turn_and_the_chat_goes_on(tmp_path: Path) -> None:
    replies = [looping() for _ in range(6)]
    replies[3] = reply("Sorry. What should I do instead?")
    with FakeServer(Script({"worker": replies}), manners=STRICT) as server:
        result = chat(tmp_path, ["write the notes", "read notes.txt instead"], server)
        bodies = [r["body"] for r in server.requests]
    assert result.returncode == 0, result.stderr
    assert len(bodies) == 4, "three rounds of the loop, then the next message"
    # The second round's failures carry a plain warning; the third's say the turn stopped.
    second = [m["content"] for m in bodies[2]["messages"] if m["role"] == "tool"][-4:]
    assert "failed the same way each time. Do not repeat it" in second[0]
    assert all("[tilth]" not in text for text in second[1:]), "one reply counts once"
    third = bodies[3]["messages"]
    stopped = next(m["content"] for m in third if "has now failed the same way 3" in str(m))
    assert "The harness stopped this turn" in stopped
    note = [
        m for m in third if m["role"] == "user" and "[tilth] The harness stopped" in m["content"]
    ]
    assert len(note) == 1 and "read_file" in note[0]["content"]
    assert third[-1] == {"role": "user", "content": "read notes.txt instead"}
    assert "note: stopped: the model repeated the same failing read_file call 3 times" in (
        result.stdout
    )
    assert "[TILTH_MAX_REPEATED_FAILURES=3]" in result.stdout
    assert "Send a message to go on" in result.stdout
    assert "What should I do instead?" in result.stdout
    assert "error" not in result.stderr.lower()
    view = SessionView.only(tmp_path / "home" / "sessions")
    (stop,) = view.payloads("turn_stopped")
    assert (stop["turn"], stop["reason"]) == (1, "repeated_failure")
    (event,) = view.payloads("repeated_failure")
    assert (event["tool"], event["count"]) == ("read_file", 3)
    assert (tmp_path / "work" / "notes.txt").read_text() == "hello\n"


def test_the_guard_can_be_turned_off(tmp_path: Path) -> None:
    replies = [looping() for _ in range(4)] + [reply("Done at last."), reply("Here.")]
    with FakeServer(Script({"worker": replies}), manners=STRICT) as server:
        result = chat(tmp_path, ["go", "and now?"], server, TILTH_MAX_REPEATED_FAILURES="0")
        asked = len(server.requests)
    assert result.returncode == 0, result.stderr
    assert asked == 6 and "Done at last." in result.stdout
    assert "stopped:" not in result.stdout
    assert not SessionView.only(tmp_path / "home" / "sessions").payloads("turn_stopped")


def test_the_step_cap_ends_a_turn_the_same_way(tmp_path: Path) -> None:
    from tests.chat.support import start
    from tilth.chat.engine import MAX_STEPS_PER_TURN

    directory = tmp_path / "work"
    directory.mkdir()
    busy = reply(None, tool_call("glob", pattern="*.py"))  # succeeds: no repeat to stop
    replies = [busy] * MAX_STEPS_PER_TURN + [reply("Here again.")]
    engine, events = start(tmp_path, directory, replies)
    try:
        first = engine.send("keep looking")
        second = engine.send("and now?")
    finally:
        engine.close()
    assert (first["outcome"], second["outcome"]) == ("stopped", "done")
    notices = [n["text"] for n in events.of("notice") if n.get("kind") == "stopped"]
    assert notices == [
        f"stopped: the model made {MAX_STEPS_PER_TURN} calls in one turn. Send a message to go "
        "on (say what to do differently), or /rewind to go back"
    ]
    assert "Here again." in events.text()
    view = SessionView.at(engine.session.dir)
    assert [(s["turn"], s["reason"]) for s in view.payloads("turn_stopped")] == [(1, "step_cap")]
