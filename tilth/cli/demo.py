"""``tilth demo``: the scripted end-to-end story (or ``--live`` against a real model)."""

from __future__ import annotations

from pathlib import Path

import click

from tilth.cli.common import io


@click.command()
@click.option(
    "--live",
    is_flag=True,
    help="Play the story against the configured endpoint instead of the scripted model.",
)
@click.option(
    "--keep",
    is_flag=True,
    help="Keep the demo's session in your TILTH_HOME (listed by `tilth sessions`).",
)
@click.option(
    "--home",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Use this directory as TILTH_HOME for the demo.",
)
def demo(live: bool, keep: bool, home: Path | None) -> int:
    """Run the whole story end to end: prep, run with one rejected task, reset to
    the seed, run again, rewind, restart a stage, resume, and chat.html.

    Without --live no network is used: a local fake server plays a scripted
    interviewer, worker and evaluator, and says so. The example project and the
    session go to a temporary directory (printed), unless --keep or --home.
    """
    from tilth.demo import DemoOptions, run_demo

    return run_demo(io(), DemoOptions(live=live, keep=keep, home=home))
