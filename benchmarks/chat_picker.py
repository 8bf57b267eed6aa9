"""``tilth chat``: how long the rewind picker (Esc Esc) takes to open on a long chat.

Run: ``python benchmarks/chat_picker.py`` (turns from ``TILTH_BENCH_TURNS``, default 1000).

It builds a chat session of N turns (one turn run for real, the others copies of its
checkpoint under their own numbers and labels), resumes it as ``tilth chat --resume``
does (which lists the turns once), and then opens the picker again and again on a real
pseudo-terminal, each time cancelled by a Ctrl-C already waiting in the input. What is
measured is the whole round: listing the turns, building the rows, drawing the full-screen
list and closing it again, so the time to open is at most this. The baseline, in the same
run, is a bare full-screen prompt_toolkit application opened and closed the same way.

Goal: median ≤ 100 ms at 1,000 turns. Not run by the test suite.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared _pty, under run_all too

from _pty import Terminal

from tilth.chat import ChatEngine
from tilth.config import load_settings
from tilth.model import Script, ScriptedModel, reply
from tilth.timeline.record.checkpoints import checkpoint_path

GOAL_MS = 100.0
ROUNDS = 15
ROWS_COLUMNS = (40, 120)
"""The terminal's size, as a person's would be."""


def build(home: Path, directory: Path, turns: int) -> str:
    """A closed chat session of ``turns`` turns in ``directory``; its id."""
    settings = load_settings({"TILTH_HOME": str(home)})
    model = ScriptedModel(Script({"*": [reply("Done.")]}))
    engine = ChatEngine.start(settings, directory, model, index_in_background=False)
    try:
        engine.send("prompt 1")
        data = engine.turns()[0].to_dict()
        for number in range(2, turns + 1):
            data.update(
                id=f"cp-{number:04d}",
                seq=number,
                turn=number,
                label=f"prompt {number}: change something in the code, please",
                files_changed=[f"src/f{number}.py"] if number % 3 == 0 else [],
            )
            checkpoint_path(engine.session, number).write_text(json.dumps(data))
    finally:
        engine.close()
    return engine.id


def measure(home: Path, session_id: str) -> list[float]:
    from rich.console import Console

    from tilth.ui.chat.repl import ChatRepl
    from tilth.ui.chat.view import ChatView
    from tilth.ui.io import IO

    settings = load_settings({"TILTH_HOME": str(home)})
    model = ScriptedModel(Script({"*": []}))
    terminal = Terminal(ROWS_COLUMNS)
    console = Console(file=terminal.stream, force_terminal=True, width=120)
    view = ChatView(console, live=True)
    engine = ChatEngine.resume(settings, session_id, model, listener=view)
    samples: list[float] = []
    try:
        engine.turns()  # as ``tilth chat --resume`` does when it starts
        repl = ChatRepl(
            engine,
            IO(stdout=terminal.stream, stderr=terminal.stream),
            view,
            interactive=True,
            terminal=(terminal.input, terminal.output),
        )
        for _ in range(ROUNDS + 1):
            terminal.input.send_text("\x03")  # waiting in the input: cancel once drawn
            started = time.perf_counter()
            repl._picker()
            samples.append(time.perf_counter() - started)
    finally:
        engine.close()
        terminal.close()
    return samples[1:]  # the first also pays for importing prompt_toolkit's layout


def measure_bare() -> list[float]:
    """A bare full-screen prompt_toolkit application, opened and closed the same way."""
    from prompt_toolkit.application import Application
    from prompt_toolkit.key_binding import KeyBindings
    from prompt_toolkit.layout import Layout, Window
    from prompt_toolkit.layout.controls import FormattedTextControl

    terminal = Terminal(ROWS_COLUMNS)
    keys = KeyBindings()
    keys.add("c-c")(lambda event: event.app.exit())
    samples: list[float] = []
    try:
        for _ in range(ROUNDS + 1):
            terminal.input.send_text("\x03")
            started = time.perf_counter()
            app: Application[None] = Application(
                layout=Layout(Window(FormattedTextControl("a list"))),
                key_bindings=keys,
                full_screen=True,
                input=terminal.input,
                output=terminal.output,
            )
            app.run()
            samples.append(time.perf_counter() - started)
    finally:
        terminal.close()
    return samples[1:]


def main() -> int:
    turns = int(os.environ.get("TILTH_BENCH_TURNS", "1000"))
    root = Path(tempfile.mkdtemp(prefix="tilth-bench-picker-"))
    try:
        directory = root / "work"
        directory.mkdir()
        started = time.perf_counter()
        session_id = build(root / "home", directory, turns)
        print(f"chat: {turns} turns, built in {time.perf_counter() - started:.1f}s")
        bare = [s * 1000 for s in measure_bare()]
        samples = [s * 1000 for s in measure(root / "home", session_id)]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    median = statistics.median(samples)
    print(
        f"bare full-screen prompt_toolkit app, open + draw + close: median "
        f"{statistics.median(bare):.1f} ms"
    )
    print(
        f"picker open + draw + close: median {median:.1f} ms "
        f"(min {min(samples):.1f}, max {max(samples):.1f}; {len(samples)} rounds)"
    )
    ok = median <= GOAL_MS
    print(f"goal: median <= {GOAL_MS:.0f} ms at 1,000 turns: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
