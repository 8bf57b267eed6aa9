"""SIGTERM and SIGHUP end ``tilth chat`` as Ctrl-C then Ctrl-D would: the running turn is
cancelled, the chat records ``stop {interrupted, detail}`` and says how to go on; piped and
on a terminal."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pexpect
import pytest

from tests.chat.tty import TtyChat, chat_env, server_for
from tests.sessionview import SessionView
from tests.warm_cli import PIPE, shared
from tilth.model import FakeServer, reply
from tilth.model.script import delay

pytestmark = pytest.mark.timeout(120)


def wait_for_request(server: FakeServer) -> None:
    waited = time.monotonic() + 30
    while not server.requests and time.monotonic() < waited:
        time.sleep(0.05)
    assert server.requests, "the turn's request never went out"


def stop_events(home: Path) -> list[dict[str, object]]:
    view = SessionView.only(home / "sessions")
    return [e.payload for e in view.events("stop")]


def test_sigterm_mid_turn_in_a_piped_chat_is_a_recorded_stop(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    home = tmp_path / "home"
    server = server_for([delay(60, reply("late"))])
    child = shared().popen(
        ["chat", "work"],
        cwd=tmp_path,
        env=chat_env(home, server),
        stdin=PIPE,
        stdout=PIPE,
        stderr=PIPE,
    )
    assert child.stdin is not None
    child.stdin.write("go\n")
    child.stdin.flush()  # stdin stays open: the chat waits for more
    wait_for_request(server)
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=30)
    assert child.wait() == 130, (out, err)
    assert "stopped by SIGTERM: the chat is saved" in err and "tilth chat --resume" in err
    stops = stop_events(home)
    assert stops[-1]["reason"] == "interrupted"
    assert stops[-1]["detail"] == "stopped by SIGTERM"
    listed = shared().run(["sessions", "--json"], env=chat_env(home, server))
    assert listed.returncode == 0, listed.stderr
    assert [row["state"] for row in json.loads(listed.stdout)] != ["interrupted"]


def test_sighup_at_the_prompt_ends_the_chat_on_a_terminal(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    home = tmp_path / "home"
    server = server_for([reply("Hello.")])
    chat = TtyChat(["work"], chat_env(home, server), tmp_path, tmp_path / "tty.log")
    try:
        chat.prompt()
        chat.send("hi")
        chat.expect_exact("Hello.")
        chat.prompt()
        chat.child.kill(signal.SIGHUP)
        chat.child.expect(pexpect.EOF, timeout=30)
        chat.child.close()
        assert chat.child.exitstatus == 130
    finally:
        chat.close()
    assert stop_events(home)[-1]["detail"] == "the terminal was closed (SIGHUP)"
