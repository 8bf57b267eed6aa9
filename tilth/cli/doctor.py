"""``tilth doctor``: every check a user needs before a real run, or a session's health."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from tilth.cli.common import io
from tilth.config import Settings, load_settings
from tilth.errors import ConfigError
from tilth.ui.io import IO

if TYPE_CHECKING:
    from tilth.health import Check


@click.command()
@click.argument("target", required=False, metavar="[WORKSPACE | SESSION_ID]")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--repair", is_flag=True, help="Check a session and repair what can be repaired.")
@click.option(
    "--source",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="With a session: the source repository, when it moved.",
)
@click.option("-y", "--yes", "assume_yes", is_flag=True, help="Do not ask to confirm repairs.")
def doctor(
    target: str | None, as_json: bool, repair: bool, source: Path | None, assume_yes: bool
) -> int:
    """Check everything a real run needs: settings and where each came from, each role's
    endpoint (GET /models; the key is never shown), the git identity, the test environment,
    file-watch limits, the sessions disk and the worker's sandbox. WORKSPACE defaults to
    the current directory. Nothing is changed and no model is called.

    With a SESSION_ID (or --repair, on the latest session without one) that session's
    health is checked instead: a deleted branch or worktree, a damaged prd.json or
    checkpoint.json, a moved repository (give --source). --repair mends each from what
    Tilth recorded, asking [y/N] first for each (-y skips the questions).

    \b
    Examples:
      tilth doctor ~/code/myrepo
      tilth doctor 20260526-091445-a1b2c3 --repair --source ~/code/moved-repo

    \b
    Exit codes: 0 a real run could start (a session: nothing is wrong); 1 a check
    failed (each ✗ says what to do) or a problem is left.
    """
    out = io()
    cfg, problem = _settings()
    if cfg is not None and (repair or _names_session(cfg, target)):
        return _session_doctor(cfg, target, repair, source, assume_yes, as_json, out)
    from tilth.health import as_dicts, ready
    from tilth.library import doctor_checks

    workspace = Path(target or ".").expanduser()
    checks = doctor_checks(workspace, cfg, problem)
    passed = ready(checks)
    if as_json:
        out.print_json(
            {
                "ok": passed,
                "workspace": str(workspace.absolute()),
                "checks": as_dicts(checks),
            }
        )
    else:
        _render(out, checks, passed)
    return 0 if passed else 1


def _settings() -> tuple[Settings | None, ConfigError | None]:
    try:
        return load_settings(), None
    except ConfigError as exc:
        return None, exc


def _names_session(cfg: Settings, target: str | None) -> bool:
    """A session id, unless a directory of that name is here (then it is a workspace)."""
    from tilth.session import is_session_id

    if not target or not is_session_id(str(target)):
        return False
    return (cfg.sessions_dir / str(target)).is_dir() or not Path(str(target)).expanduser().exists()


def _session_doctor(
    cfg: Settings,
    target: str | None,
    repair: bool,
    source: Path | None,
    assume_yes: bool,
    as_json: bool,
    out: IO,
) -> int:
    """A session's health (and ``--repair``): provided by ``tilth.cli.repair``."""
    from tilth.cli.repair import session_doctor
    from tilth.library import open_session
    from tilth.session import is_session_id

    session_id = target if target and is_session_id(target) else None
    session = open_session(session_id, cfg)
    code: int = session_doctor(
        session, repair=repair, source=source, yes=assume_yes, as_json=as_json, out=out
    )
    return code


def _render(out: IO, checks: list[Check], passed: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, show_header=False)
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for check in checks:
        mark = "✓" if check.ok else ("!" if not check.required else "✗")
        style = "green" if check.ok else ("yellow" if not check.required else "red")
        detail = check.detail if check.ok or not check.fix else f"{check.detail}\n→ {check.fix}"
        table.add_row(Text(mark, style=style), Text(check.name), Text(detail))
    out.table(table)
    out.say("")
    if passed:
        out.ok("ready: a real run could start (tilth prep-feature, then tilth run)")
    else:
        failed = sum(1 for check in checks if check.required and not check.ok)
        out.say(f"not ready: {failed} check(s) failed; each ✗ says what to do", style="red")
