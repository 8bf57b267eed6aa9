"""SPEC §7 `tilth reset --to-seed` from outside: the first seed, exactly, and its pre-flight."""

from __future__ import annotations

import json
import shutil

from tests.e2e.lab import TINY_CLOCK, Live, dir_digest, prep_that_never_finishes, read_jsonl


def test_reset_to_seed_is_exactly_the_first_seed(done: Live) -> None:
    sdir = done.sdir()
    (sdir / "proposed-learnings.md").write_text("# Proposed learnings\n")
    meta_before = (sdir / "seed-meta.json").read_bytes()
    seed_sha = done.seed_sha()
    seed_line = next(
        line
        for line in (sdir / "events.jsonl").read_text().splitlines()
        if json.loads(line)["type"] == "seed_committed"
    )
    prepared_tokens = done.of_type("session_prepared")[-1]["payload"]["tokens_used"]
    (done.worktree() / "scratch.txt").write_text("untracked\n")

    refused = done.cli("reset", "--to-seed", done.sid)
    assert refused.returncode != 0
    assert done.head() != seed_sha

    result = done.cli("reset", "--to-seed", done.sid, "-y")
    assert result.returncode == 0, result.stdout + result.stderr
    assert done.head() == seed_sha
    assert done.porcelain() == ""
    assert set(done.statuses().values()) == {"pending"}
    cp = done.record().to_dict()
    assert cp["status"] == "prepared"
    assert cp["tokens_used"] == prepared_tokens
    assert (sdir / "events.jsonl").read_text().splitlines()[-1] == seed_line
    for gone in ("ledger", "progress.txt", "proposed-learnings.md", "summary.json", "chat.html"):
        assert not (sdir / gone).exists(), gone
    assert (sdir / "seed-meta.json").read_bytes() == meta_before
    ops = read_jsonl(sdir / "timeline" / "operations.jsonl")
    assert [o["kind"] for o in ops] == ["reset_to_seed"]

    # a following `tilth run <workspace>` picks the session up as prepared
    again = done.cli("run", str(done.proj), TILTH_MAX_WALL_CLOCK_MINUTES=TINY_CLOCK)
    assert again.returncode == 3, again.stdout + again.stderr
    assert done.sid in again.stdout
    starts = done.of_type("session_start")
    assert starts[-1]["payload"].get("phase") == "run"


def test_reset_to_seed_confirmation_says_it_is_destructive(done: Live) -> None:
    refused = done.cli("reset", "--to-seed", done.sid, input_text="n\n")
    text = (refused.stdout + refused.stderr).lower()
    assert refused.returncode != 0
    assert "irreversible" in text and "destructive" in text


def test_reset_to_seed_keeps_gitignored_cruft(done: Live) -> None:
    exclude = done.proj / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    with exclude.open("a") as handle:
        handle.write("*.e2e-cruft\n")
    cruft = done.worktree() / "kept.e2e-cruft"
    cruft.write_text("ignored\n")
    (done.worktree() / "gone.txt").write_text("untracked\n")
    result = done.cli("reset", "--to-seed", done.sid, "-y")
    assert result.returncode == 0, result.stdout + result.stderr
    assert cruft.exists()  # git clean -fd, not -fdx
    assert not (done.worktree() / "gone.txt").exists()


def _no_op_snapshot(live: Live) -> tuple[object, ...]:
    return (dir_digest(live.sdir()), live.head() if live.worktree().is_dir() else None)


def test_reset_to_seed_preflight_rejects_a_broken_prd(done: Live) -> None:
    prd = done.prd()
    prd[0]["id"] = "T-1"
    (done.sdir() / "prd.json").write_text(json.dumps(prd))
    before = _no_op_snapshot(done)
    result = done.cli("reset", "--to-seed", done.sid, "-y")
    assert result.returncode not in (0, 3)
    assert result.stderr.startswith("error:"), result.stderr
    assert "tilth reset" in result.stderr and "prep-feature" in result.stderr
    assert _no_op_snapshot(done) == before


def test_reset_to_seed_preflight_rejects_a_missing_worktree(done: Live) -> None:

    shutil.rmtree(done.worktree())
    before = _no_op_snapshot(done)
    result = done.cli("reset", "--to-seed", done.sid, "-y")
    assert result.returncode not in (0, 3)
    assert result.stderr.startswith("error:"), result.stderr
    assert "Traceback" not in result.stderr
    assert _no_op_snapshot(done) == before


def test_reset_to_seed_preflight_rejects_a_session_without_a_seed(blank: Live) -> None:
    sid = prep_that_never_finishes(blank)
    assert "seed_committed" not in blank.types(sid)
    before = dir_digest(blank.sdir(sid))
    result = blank.cli("reset", "--to-seed", sid, "-y")
    assert result.returncode not in (0, 3)
    assert result.stderr.startswith("error:"), result.stderr
    assert "prep-feature" in result.stderr
    assert dir_digest(blank.sdir(sid)) == before
