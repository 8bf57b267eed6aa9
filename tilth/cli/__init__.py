"""The ``tilth`` command: a thin click front over the library.

Verbs are imported lazily so ``tilth --help`` starts fast. Every ``TilthError``
is turned into a one-line message and its exit code here — never a traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any

import click

from tilth import __version__

# verb -> (module, attribute, one-line help). Order is the order shown in --help.
VERBS: dict[str, tuple[str, str, str]] = {
    "prep-feature": ("tilth.cli.prep", "prep_feature", "Interview the user and write a seed."),
    "run": ("tilth.cli.run", "run", "Run the prepared session for a workspace."),
    "resume": ("tilth.cli.run", "resume", "Continue a stopped session where it left off."),
    "sessions": ("tilth.cli.sessions", "sessions", "List sessions."),
    "attempts": ("tilth.cli.attempts", "attempts", "List a session's attempts; pick a winner."),
    "enqueue": ("tilth.cli.attempts", "enqueue", "Put sessions on the durable queue."),
    "worker": ("tilth.cli.attempts", "worker", "Run queued sessions and attempts."),
    "checkpoints": ("tilth.cli.timeline", "checkpoints", "List a session's checkpoints."),
    "rewind": ("tilth.cli.timeline", "rewind", "Return code and/or conversation to a checkpoint."),
    "restart": ("tilth.cli.timeline", "restart", "Restart a task, or a task from a stage."),
    "fork": ("tilth.cli.branching", "fork", "Start a new session from a checkpoint."),
    "summarize": ("tilth.cli.branching", "summarize", "Replace part of a thread with a summary."),
    "reset": ("tilth.cli.reset", "reset", "Delete a session, or rewind it to its seed."),
    "visualize": ("tilth.cli.visualize", "visualize", "Write a session's chat.html."),
    "chat": ("tilth.cli.chat", "chat", "Work with the model turn by turn in a directory."),
    "serve": ("tilth.cli.serve", "serve", "Open the local web UI."),
    "doctor": ("tilth.cli.doctor", "doctor", "Check everything a real run needs."),
    "demo": ("tilth.cli.demo", "demo", "Run the scripted end-to-end demo (no network)."),
}


def _available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


class LazyGroup(click.Group):
    """A group whose subcommands are imported only when used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name, (module, _, _) in VERBS.items() if _available(module)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = VERBS.get(cmd_name)
        if entry is None or not _available(entry[0]):
            return None
        command = getattr(importlib.import_module(entry[0]), entry[1])
        assert isinstance(command, click.Command)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            import difflib

            close = difflib.get_close_matches(name, self.list_commands(ctx), n=1)
            if close:
                ctx.fail(f"No such command {name!r}. Did you mean {close[0]!r}?")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, VERBS[name][2]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tilth")
def cli() -> None:
    """Tilth lets a language model build a feature in a git repository while
    nobody watches, and lets you return to any point of that work.

    \b
    Typical flow:
      tilth prep-feature <repo>   interview → seed (tasks + acceptance tests)
      tilth run <repo>            worker + evaluator work through the tasks
      tilth checkpoints           every point you can return to
      tilth rewind --to <cp>      go back (code, conversation or both)
      tilth resume                continue a stopped session

    Start with `tilth doctor` (is everything set up?) or `tilth demo` (the whole
    story, offline). Settings come from the environment or a .env file:
    $TILTH_ENV_FILE, $TILTH_HOME/.env or ./.env (see docs/configuration.md).
    """


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code."""
    from tilth.errors import Aborted, Interrupted, TilthError

    try:
        result: Any = cli.main(args=argv, prog_name="tilth", standalone_mode=False)
    except Aborted as exc:
        # Declining is a choice, not a failure: say so plainly (exit 1, no "error:").
        click.secho(exc.message, fg="yellow", err=True)
        return exc.exit_code
    except TilthError as exc:
        if isinstance(exc, Interrupted):
            # As click does for Ctrl-C: end the line the user was typing on first.
            click.echo(err=True)
        _report(exc)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    except BrokenPipeError:
        return 1
    except OSError as exc:
        if os.environ.get("TILTH_DEBUG") or not exc.filename:
            return _unexpected(exc)
        from tilth.errors import StorageError

        _report(StorageError("use", exc.filename, exc))
        return 1
    except Exception as exc:  # the CLI boundary: never a bare traceback
        return _unexpected(exc)
    if isinstance(result, int):
        return result
    return 0


def _unexpected(exc: Exception) -> int:
    if os.environ.get("TILTH_DEBUG"):
        raise exc
    from tilth.ui.io import neutralise

    shown = neutralise(f"error: unexpected {type(exc).__name__}: {exc}")
    click.secho(shown, fg="red", bold=True, err=True)
    click.secho("hint: set TILTH_DEBUG=1 to see the traceback", fg="yellow", err=True)
    return 1


def _report(exc: Exception) -> None:
    from tilth.errors import TilthError
    from tilth.ui.io import neutralise

    message = neutralise(str(exc))
    hint = neutralise(exc.hint) if isinstance(exc, TilthError) and exc.hint else None
    output = getattr(exc, "output", "")
    if isinstance(output, str) and output.strip():
        # A failing TILTH_SETUP_COMMAND: its own words say what went wrong.
        click.echo(neutralise(output.rstrip()), err=True)
    click.secho(f"error: {message}", fg="red", bold=True, err=True)
    if hint:
        click.secho(f"hint: {hint}", fg="yellow", err=True)


def entry() -> None:
    """Wrapper used by ``python -m tilth``."""
    sys.exit(main())
