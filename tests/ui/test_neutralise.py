"""Text from a model or a file reaches the terminal with its control sequences shown, not run."""

from __future__ import annotations

import io
import subprocess
from collections.abc import Callable
from pathlib import Path

from seed.support import cli_env, write_seed

from tilth.model import FakeServer, Script, reply, tool_call
from tilth.ui.io import IO, neutralise

TITLE = "\x1b]0;pwned-title\x07"
CLEAR = "\x1b[2J\x1b[H"

RunCli = Callable[..., subprocess.CompletedProcess[str]]


def test_neutralise_shows_escapes_and_keeps_newlines_and_tabs() -> None:
    text = f"a{TITLE}b\r\n\tc\x9b31m\u202edone"
    shown = neutralise(text)
    assert shown == "a\\x1b]0;pwned-title\\x07b\\r\n\tc\\x9b31m\\u202edone"
    assert "\x1b" not in shown and "\x07" not in shown


def test_every_io_output_path_neutralises() -> None:
    out, err = io.StringIO(), io.StringIO()
    term = IO(stdin=io.StringIO(""), stdout=out, stderr=err)
    term.say(f"say {TITLE}")
    term.markup(f"[bold]markup[/] {CLEAR}")
    term.note(f"note {TITLE}")
    term.warn(f"warn {TITLE}")
    term.error(f"error {TITLE}", hint=f"hint {CLEAR}")
    from rich.table import Table

    table = Table("name")
    table.add_row(f"cell {TITLE}")
    term.table(table)
    assert "\x1b" not in out.getvalue() + err.getvalue()
    assert out.getvalue().count("\\x1b") == 4
    assert err.getvalue().count("\\x1b") == 5


def test_an_escape_sequence_in_an_interview_question_prints_visibly(
    cli: RunCli, sessions_dir: Path, repo: Path
) -> None:
    script = Script(
        [
            reply(
                f"Let me ask. {TITLE}",
                tool_call(
                    "ask_user",
                    question=f"Which format?{TITLE}{CLEAR}",
                    options=[f"CSV{CLEAR}", "JSON"],
                ),
            ),
            write_seed(1),
        ]
    )
    with FakeServer(script) as server:
        result = cli(
            "prep-feature", str(repo), "--brief", "x", input_text="2\n", env=cli_env(server)
        )
    assert result.returncode == 0, result.stderr
    screen = result.stdout + result.stderr
    assert "\x1b" not in screen and "\x07" not in screen
    assert "Which format?\\x1b]0;pwned-title\\x07\\x1b[2J\\x1b[H" in screen
    assert "1) CSV\\x1b[2J\\x1b[H" in screen
    assert "2) JSON" in screen


def test_chat_shows_an_escape_sequence_from_the_model_and_a_file_visibly(tmp_path: Path) -> None:
    from tests.chat.test_chat_scripted import run_chat

    work = tmp_path / "dir"
    work.mkdir()
    (work / "notes.txt").write_text(f"from a file {CLEAR}\n")
    replies = [
        reply(f"Here {TITLE}", tool_call("bash", command="cat notes.txt")),
        reply(f"Done {CLEAR}"),
    ]
    done = run_chat(tmp_path, str(work), ["read the notes"], replies)
    assert done.returncode == 0, done.stdout + done.stderr
    screen = done.stdout + done.stderr
    assert "\x1b" not in screen and "\x07" not in screen
    assert "Here \\x1b]0;pwned-title\\x07" in screen
    assert "Done \\x1b[2J\\x1b[H" in screen
    assert "from a file \\x1b[2J\\x1b[H" in screen
