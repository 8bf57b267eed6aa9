"""``tilth chat``: time from the end of a model reply to the prompt being ready again.

Run: ``python benchmarks/chat_turn.py [--files 10000] [--turns 30]``.

A chat works directly in a directory of 10,000 files (about 1 KB each, 100 per
directory). The model is a ``ScriptedModel`` whose every call is timed; turns alternate
between an edit (``write_file``) and a ``bash`` command that changes two files, each
followed by a text reply. What is measured is the chat's own work after the last reply
of a turn: capturing the turn's files, completing its checkpoint, printing the end of the
turn, and drawing the input prompt again (prompt_toolkit, on a real pseudo-terminal).
The prompt counts as ready when its first render is done.

The baseline, in the same run, is a bare prompt_toolkit loop on the same kind of
terminal: read a line, do nothing, draw the prompt again.

Goal: median ≤ 50 ms. Not run by the test suite.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared _pty, under run_all too

from _pty import Terminal

from tilth.chat import ChatEngine
from tilth.config import load_settings
from tilth.model import Script, ScriptedModel, reply, tool_call
from tilth.model.base import AssistantTurn

GOAL_MS = 50.0


class TimedModel:
    """Wraps a model and records when each call returns."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.ends: list[float] = []

    @property
    def name(self) -> str:
        return self.inner.name

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **options: Any
    ) -> AssistantTurn:
        turn = self.inner.complete(messages, tools, **options)
        self.ends.append(time.perf_counter())
        return turn


def make_tree(root: Path, files: int) -> None:
    for index in range(files):
        folder = root / f"pkg{index // 100:03d}"
        folder.mkdir(exist_ok=True)
        (folder / f"mod{index % 100:02d}.py").write_text(f"# module {index}\n" + "x = 1\n" * 150)


def replies(turns: int) -> list[dict[str, Any]]:
    out = []
    for turn in range(turns):
        if turn % 2 == 0:
            call = tool_call("write_file", path=f"notes/n{turn}.md", content=f"note {turn}\n" * 20)
        else:
            command = f"echo {turn} >> pkg001/mod01.py && echo {turn} > pkg002/new{turn}.txt"
            call = tool_call("bash", command=command)
        out += [reply(None, call), reply(f"Turn {turn} done: **changed** a file.\n\n- one\n- two")]
    return out


def measure_chat(directory: Path, home: Path, turns: int) -> list[float]:
    from rich.console import Console

    from tilth.ui.chat.repl import ChatRepl
    from tilth.ui.chat.view import ChatView
    from tilth.ui.io import IO

    settings = load_settings({"TILTH_HOME": str(home)})
    model = TimedModel(ScriptedModel(Script({"*": replies(turns)})))
    terminal = Terminal()
    console = Console(file=terminal.stream, force_terminal=True, width=120)
    view = ChatView(console, live=True)
    engine = ChatEngine.start(settings, directory, model, listener=view)
    engine.capture.wait_ready()  # the one-off index is not part of a turn
    repl = ChatRepl(
        engine,
        IO(stdout=terminal.stream, stderr=terminal.stream),
        view,
        interactive=True,
        terminal=(terminal.input, terminal.output),
    )
    samples: list[float] = []
    sent = {"n": 0}

    def on_render(_: Any) -> None:
        if model.ends and sent["n"] > len(samples):
            samples.append(time.perf_counter() - model.ends[-1])
        if sent["n"] < turns:
            sent["n"] += 1
            terminal.input.send_text(f"please do step {sent['n']}\r")
        else:
            terminal.input.send_text("\x04")

    session = repl._session()
    session.app.after_render += on_render
    try:
        repl.run()
        recorded = len(engine.turns())
    finally:
        engine.close()
        terminal.close()
    if recorded != turns or len(samples) != turns:
        raise SystemExit(f"the chat ran {recorded} of {turns} turns ({len(samples)} timed)")
    return samples[1:]  # the first turn also pays for imports and the first inotify drain


def measure_bare(turns: int) -> list[float]:
    from prompt_toolkit import PromptSession

    terminal = Terminal()
    session: PromptSession[str] = PromptSession(input=terminal.input, output=terminal.output)
    samples: list[float] = []
    state: dict[str, Any] = {"end": None, "n": 0}

    def on_render(_: Any) -> None:
        if state["end"] is not None:
            samples.append(time.perf_counter() - state["end"])
            state["end"] = None
        if state["n"] < turns:
            state["n"] += 1
            terminal.input.send_text(f"please do step {state['n']}\r")
        else:
            terminal.input.send_text("\x04")

    session.app.after_render += on_render
    try:
        while True:
            try:
                session.prompt("› ")
            except EOFError:
                break
            state["end"] = time.perf_counter()  # "the reply ended" at once
    finally:
        terminal.close()
    return samples[1:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    env = os.environ
    parser.add_argument("--files", type=int, default=int(env.get("TILTH_BENCH_FILES", 10000)))
    parser.add_argument("--turns", type=int, default=int(env.get("TILTH_BENCH_TURNS", 30)))
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="tilth-bench-chat-"))
    try:
        directory = root / "work"
        directory.mkdir()
        make_tree(directory, args.files)
        bare = measure_bare(args.turns)
        chat = measure_chat(directory, root / "home", args.turns)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    bare_ms = statistics.median(bare) * 1000
    chat_ms = statistics.median(chat) * 1000
    worst = max(chat) * 1000
    print(f"directory: {args.files} files; {args.turns} turns (edit and bash alternating)")
    print(f"bare prompt_toolkit loop, reply end -> prompt ready: median {bare_ms:.1f} ms")
    print(f"tilth chat,               reply end -> prompt ready: median {chat_ms:.1f} ms")
    print(f"  the chat's own work: {chat_ms - bare_ms:.1f} ms; slowest turn {worst:.1f} ms")
    ok = chat_ms <= GOAL_MS
    print(f"goal: median <= {GOAL_MS:.0f} ms: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
