"""``tilth chat [DIR] [--resume ID]``: work with the model turn by turn, directly in DIR."""

from __future__ import annotations

from pathlib import Path

import click

from tilth.cli.common import io, settings


@click.command()
@click.argument(
    "directory", required=False, type=click.Path(path_type=Path), metavar="[DIR]", default=None
)
@click.option("--resume", "resume_id", default=None, metavar="ID", help="Continue a chat session.")
def chat(directory: Path | None, resume_id: str | None) -> int:
    """Work with the model turn by turn in DIR (default: here), git repository or not.

    \b
    Every turn is a checkpoint: Esc Esc on an empty prompt (or /rewind) goes back
    to any turn: code, conversation or both, fork from there, or summarize.
    /help lists the commands. Tilth never runs git in DIR and never touches DIR/.git.
    With stdin not a terminal, each line is one prompt or /command.
    """
    from tilth.chat import ChatEngine, chat_directory
    from tilth.errors import UsageError
    from tilth.model import model_for
    from tilth.ui.chat.repl import ChatRepl
    from tilth.ui.chat.view import ChatView, terminal_safe

    # A .env in the directory the chat works in is the model's to write: never read it.
    cfg = settings(() if resume_id else ((directory or Path.cwd()).expanduser(),))
    out = io()
    interactive = out.interactive and out.stdout.isatty()
    if resume_id and directory is not None:
        raise UsageError(
            "give a directory or --resume, not both",
            hint="a resumed chat works in the directory it started in",
        )
    # A resumed chat works where it started (checked again by the engine, from its record).
    where = None if resume_id else chat_directory(directory or Path.cwd())
    model = model_for(cfg, "worker")
    view = ChatView(out.console, live=interactive, errors=out.err_console)
    holder: dict[str, ChatRepl] = {}

    def confirm(command: str, reason: str) -> bool:
        return holder["repl"].confirm(command, reason)

    options = {"listener": view, "confirm": confirm if interactive else None}
    if resume_id:
        engine = ChatEngine.resume(cfg, resume_id, model, **options)
        turns = engine.turns()
        out.note(
            f"tilth chat: resumed session {engine.id} in {engine.directory} "
            f"({len(turns)} turn(s) so far)"
        )
        if turns and interactive:
            out.note("where it left off:")
            view.replay_last_turn(engine.history())
        elif turns:
            out.note(f"last prompt (turn {len(turns)}): {terminal_safe(turns[-1].label)}")
    else:
        assert where is not None
        engine = ChatEngine.start(cfg, where, model, **options)
        out.note(f"tilth chat: session {engine.id} in {engine.directory}")
    view.tokens = lambda: engine.tokens_used
    for warning in (engine.sandbox_warning(), engine.tools_warning()):
        if warning:
            out.warn(warning)
    if interactive:
        out.note("/help for commands · Esc Esc on an empty prompt to rewind · Ctrl-D to leave")
    repl = ChatRepl(engine, out, view, interactive=interactive, history=cfg.home / "chat-history")
    holder["repl"] = repl
    finished = False
    try:
        code = repl.run()
        finished = True
    finally:
        engine.close(status="all_done" if finished else "failed", stopped=repl.leaving)
    if repl.leaving:
        out.warn(f"{repl.leaving}: the chat is saved — `tilth chat --resume {engine.id}` goes on")
    return code
