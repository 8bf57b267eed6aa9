"""prep-feature answers without a person: --answers FILE, piped stdin, and Ctrl-C."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pexpect
import pytest
from seed.support import Terminal, cli_env, session_dirs, write_seed

from tests.chat.tty import TerminalChild
from tests.sessionview import SessionView
from tests.stdin_wait import wait_reading_stdin
from tests.warm_cli import PIPE, shared
from tilth.model import FakeServer, Script, reply, tool_call

RunCli = Callable[..., subprocess.CompletedProcess[str]]


def two_questions() -> Script:
    return Script(
        [
            reply(None, tool_call("ask_user", question="Pick one", options=["red", "blue"])),
            reply(None, tool_call("ask_user", question="Why?")),
            write_seed(1),
        ]
    )


def answers_seen(server: FakeServer) -> list[str]:
    return [r["body"]["messages"][-1]["content"] for r in server.requests[1:]]


def test_answers_file_drives_the_interview(
    cli: RunCli, sessions_dir: Path, tmp_path: Path, repo: Path
) -> None:
    answers = tmp_path / "answers.txt"
    answers.write_text("0\ngreen, actually\nbecause CI\n")
    with FakeServer(two_questions()) as server:
        result = cli(
            "prep-feature",
            str(repo),
            "--brief",
            "b",
            "--answers",
            str(answers),
            env=cli_env(server),
        )
        seen = answers_seen(server)
    assert result.returncode == 0, result.stderr
    assert seen == ["green, actually", "because CI"]
    (session_dir,) = session_dirs(sessions_dir)
    assert SessionView.at(session_dir).status == "prepared"


def test_running_out_of_answers_fails_clearly(
    cli: RunCli, sessions_dir: Path, tmp_path: Path, repo: Path
) -> None:
    answers = tmp_path / "answers.txt"
    answers.write_text("2\n")
    with FakeServer(two_questions()) as server:
        result = cli(
            "prep-feature",
            str(repo),
            "--brief",
            "b",
            "--answers",
            str(answers),
            input_text="this stdin must not be read\n",
            env=cli_env(server),
        )
    assert result.returncode == 1
    assert f"answers file {answers} ran out of answers at question 2: 'Why?'" in result.stderr
    assert "Traceback" not in result.stderr
    (session_dir,) = session_dirs(sessions_dir)
    assert SessionView.at(session_dir).status == "failed"
    assert SessionView.at(session_dir).payloads("stop")[0]["reason"] == "error"


def test_piped_stdin_answers_and_a_bad_option_number(
    cli: RunCli, sessions_dir: Path, repo: Path
) -> None:
    with FakeServer(two_questions()) as server:
        piped = cli(
            "prep-feature",
            str(repo),
            "--brief",
            "b",
            input_text="blue-ish\nbecause\n",
            env=cli_env(server),
        )
        assert piped.returncode == 0, piped.stderr
        assert answers_seen(server) == ["blue-ish", "because"]
    with FakeServer(two_questions()) as server:
        bad = cli(
            "prep-feature",
            str(repo),
            "--brief",
            "b",
            "--keep-existing",
            input_text="5\nbecause\n",
            env=cli_env(server),
        )
    assert bad.returncode == 1
    assert "answer '5' to question 1 is not an option" in bad.stderr
    statuses = sorted(SessionView.at(p).status for p in session_dirs(sessions_dir))
    assert statuses == ["failed", "prepared"]


def read_until(stream: int, needle: bytes, deadline: float) -> bytes:
    seen = b""
    while needle not in seen:
        assert time.monotonic() < deadline, f"waited for {needle!r}; got {seen!r}"
        ready, _, _ = select.select([stream], [], [], 0.2)
        if ready:
            chunk = os.read(stream, 4096)
            assert chunk, f"output ended before {needle!r}: {seen!r}"
            seen += chunk
    return seen


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_stopped_while_waiting_for_an_answer(
    tilth_home: Path, sessions_dir: Path, repo: Path, signum: int
) -> None:
    with FakeServer(two_questions()) as server:
        child = shared().popen(
            ["prep-feature", str(repo), "--brief", "b"],
            stdin=PIPE,
            stdout=PIPE,
            stderr=PIPE,
            env={**os.environ, **cli_env(server)},
        )
        try:
            assert child.stdout is not None
            read_until(child.stdout.fileno(), b"0) Other", time.monotonic() + 60)
            child.send_signal(signum)
            _, stderr = child.communicate(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert child.returncode == 130, stderr
    (session_dir,) = session_dirs(sessions_dir)
    assert f"interrupted; session {session_dir.name} is marked failed" in stderr
    assert "Traceback" not in stderr
    assert SessionView.at(session_dir).status == "failed"
    stop = SessionView.at(session_dir).payloads("stop")
    assert [s["reason"] for s in stop] == ["interrupted"]


def test_ctrl_c_on_a_terminal_at_the_question(sessions_dir: Path, repo: Path) -> None:
    with FakeServer(two_questions()) as server:
        term = Terminal(["prep-feature", str(repo), "--brief", "b"], cli_env(server))
        term.expect("0) Other")
        term.expect("> ")
        term.interrupt()
        code, text = term.finish()
    assert code == 130, text
    (session_dir,) = session_dirs(sessions_dir)
    assert SessionView.at(session_dir).status == "failed"
    assert "marked failed" in text
    # The error starts on its own line, not glued to the "> " prompt.
    assert "\nerror: interrupted;" in text, text


def slow_first_reply() -> Script:
    """An interview whose first reply takes long: the prep waits on the model."""
    ask = reply(None, tool_call("ask_user", question="Why?"))
    return Script([{"type": "delay", "seconds": 30, "then": ask}])


@pytest.mark.parametrize(
    ("waiting_on", "signals", "gap"),
    [
        ("the user", (signal.SIGINT, signal.SIGINT), 0.0),
        ("the user", (signal.SIGINT, signal.SIGINT), 0.01),
        ("the user", (signal.SIGTERM, signal.SIGINT), 0.05),
        ("the model", (signal.SIGINT, signal.SIGINT), 0.0),
        ("the model", (signal.SIGINT, signal.SIGINT), 0.01),
    ],
)
def test_a_second_interrupt_still_leaves_the_hint(
    tilth_home: Path,
    sessions_dir: Path,
    repo: Path,
    waiting_on: str,
    signals: tuple[int, int],
    gap: float,
) -> None:
    """Found in the user trial: `timeout` forwarding its group's signal (or a double Ctrl-C)
    interrupted the closing-out of the first: the session stayed `running`, the output said
    only "interrupted" (or an unexpected RuntimeError), the exit was by the signal."""
    script = two_questions() if waiting_on == "the user" else slow_first_reply()
    with FakeServer(script) as server:
        child = shared().popen(
            ["prep-feature", str(repo), "--brief", "b"],
            stdin=PIPE,
            stdout=PIPE,
            stderr=PIPE,
            env={**os.environ, **cli_env(server)},
        )
        try:
            assert child.stdout is not None
            if waiting_on == "the user":
                read_until(child.stdout.fileno(), b"0) Other", time.monotonic() + 60)
            else:
                deadline = time.monotonic() + 60
                while not server.requests:
                    assert time.monotonic() < deadline, "the prep never asked the model"
                    time.sleep(0.05)
            child.send_signal(signals[0])
            time.sleep(gap)
            child.send_signal(signals[1])
            _, stderr = child.communicate(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert child.returncode == 130, stderr
    (session_dir,) = session_dirs(sessions_dir)
    assert f"interrupted; session {session_dir.name} is marked failed" in stderr, stderr
    assert f"hint: discard it with `tilth reset {session_dir.name}`" in stderr, stderr
    assert "Traceback" not in stderr and "unexpected" not in stderr, stderr
    view = SessionView.at(session_dir)
    assert view.status == "failed"
    assert [s["reason"] for s in view.payloads("stop")] == ["interrupted"]


@pytest.mark.parametrize(
    ("waiting_on", "gap"), [("the user", 0.0), ("the user", 0.01), ("the model", 0.01)]
)
def test_ctrl_c_pressed_twice_on_a_terminal_still_closes_the_session_out(
    tilth_home: Path, sessions_dir: Path, repo: Path, waiting_on: str, gap: float
) -> None:
    """Ctrl-C pressed twice on the prep's controlling terminal: the terminal sends the
    foreground group SIGINT twice, well within ``REPEAT_SECONDS``. The second is ignored, so
    the first's closing-out (the session marked failed, the hint) is not cut short."""
    script = two_questions() if waiting_on == "the user" else slow_first_reply()
    with FakeServer(script) as server:
        master, slave = pty.openpty()
        try:
            process = shared().popen(
                ["prep-feature", str(repo), "--brief", "b"],
                env={**os.environ, **cli_env(server)},
                stdin=slave,
                stdout=slave,
                stderr=slave,
                terminal=True,
            )
        finally:
            os.close(slave)
        child = TerminalChild(master, process)
        child.delaybeforesend = None  # the keys as fast as a double press, not a typist's pace
        try:
            if waiting_on == "the user":
                child.expect_exact("0) Other", timeout=60)
                wait_reading_stdin(process.pid)
            else:
                deadline = time.monotonic() + 60
                while not server.requests:
                    assert time.monotonic() < deadline, "the prep never asked the model"
                    time.sleep(0.05)
            child.send("\x03")
            time.sleep(gap)
            child.send("\x03")
            child.expect(pexpect.EOF, timeout=60)
            text = child.before or ""
        finally:
            child.close()
    assert child.exitstatus == 130, (child.signalstatus, text)
    (session_dir,) = session_dirs(sessions_dir)
    flat = " ".join(text.split())
    assert f"interrupted; session {session_dir.name} is marked failed" in flat, text
    assert f"hint: discard it with `tilth reset {session_dir.name}`" in flat, text
    assert "Traceback" not in text, text
    view = SessionView.at(session_dir)
    assert view.status == "failed"
    assert [s["reason"] for s in view.payloads("stop")] == ["interrupted"]
