"""``tilth visualize`` through the real CLI."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from tilth.session.store import Session

RunCli = Callable[..., subprocess.CompletedProcess[str]]


def test_writes_the_named_session(cli: RunCli, sessions_dir: Path, tmp_path: Path) -> None:
    session = Session.create(sessions_dir, tmp_path / "repo")
    session.log("model_call", model="scripted", scripted=True, content="<b>hi</b>")
    Session.create(sessions_dir, tmp_path / "other")
    result = cli("visualize", session.id)
    assert result.returncode == 0, result.stderr
    path = session.dir / "chat.html"
    assert result.stdout.strip() == f"wrote {path}"
    page = path.read_text()
    assert "&lt;b&gt;hi&lt;/b&gt;" in page
    assert "<b>hi</b>" not in page


def test_latest_session_when_no_id(cli: RunCli, sessions_dir: Path, tmp_path: Path) -> None:
    pair = [Session.create(sessions_dir, tmp_path / "repo") for _ in range(2)]
    # Ids sort chronologically; two made in the same second are ordered by their suffix.
    older, newer = sorted(pair, key=lambda s: s.id)
    result = cli("visualize")
    assert result.returncode == 0, result.stderr
    assert f"latest session is {newer.id}" in result.stderr
    assert (newer.dir / "chat.html").is_file()
    assert not (older.dir / "chat.html").exists()


def test_unknown_session_is_a_clear_error(cli: RunCli, sessions_dir: Path) -> None:
    result = cli("visualize", "20990101-000000-abcdef")
    assert result.returncode == 2
    assert result.stderr.startswith("error: no session 20990101-000000-abcdef")
    assert "Traceback" not in result.stderr


def test_no_sessions_at_all(cli: RunCli) -> None:
    result = cli("visualize")
    assert result.returncode == 2
    assert "error: no sessions found" in result.stderr


def test_unwritable_session_dir_is_a_clear_error(
    cli: RunCli, sessions_dir: Path, tmp_path: Path
) -> None:
    session = Session.create(sessions_dir, tmp_path / "repo")
    session.chat_html_path.mkdir()  # a directory where the file must go: replace fails
    result = cli("visualize", session.id)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: could not write {session.chat_html_path}")
    assert "Traceback" not in result.stderr


def test_the_seed_panel_counts_the_interviews_tokens_once(
    cli: RunCli, sessions_dir: Path, tmp_path: Path
) -> None:
    from tilth.session.files import atomic_write_json

    session = Session.create(sessions_dir, tmp_path / "repo")
    tokens = {"prompt": 20, "completion": 10, "total": 30}
    atomic_write_json(session.seed_meta_path, {"interviewer_model": "m", "tokens": tokens})
    result = cli("visualize", session.id)
    assert result.returncode == 0, result.stderr
    seed = (session.dir / "chat.html").read_text().split('<section class="panel seed">')[1]
    assert "m · 30 tokens" in seed.split("</section>")[0]
    atomic_write_json(session.seed_meta_path, {"tokens": {"prompt": 20, "completion": 10}})
    assert cli("visualize", session.id).returncode == 0
    assert "30 tokens" in (session.dir / "chat.html").read_text()
