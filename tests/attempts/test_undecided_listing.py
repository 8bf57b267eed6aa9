"""`tilth attempts` for a task whose attempts a stop cut short: each shows what it has done
so far (status, stage, turns, tokens since its fork, its gate), marked undecided and kept
apart from a decided attempt's figures; `--pick` refuses until a resume decides them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.attempts.undecided_support import stop_mid_attempts
from tests.conftest import run_cli

DECIDED_FIGURES = ("passed", "accepted", "failed_gates", "diff_lines", "tokens", "reason")


def test_undecided_attempts_show_what_they_did_so_far(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    stopped = stop_mid_attempts(repo, sessions_dir, tmp_path)
    parent, (first, second) = stopped.seeded.session, stopped.attempts

    # While the run went on: attempt 2 was running, attempt 1 done and waiting for it.
    during = {row["session"]: row["so_far"] for row in stopped.while_running}
    assert during[second.id]["status"] == "running", stopped.while_running
    assert during[first.id]["status"] == "undecided", stopped.while_running

    rows = json.loads(run_cli("attempts", parent.id, "T-001", "--json").stdout)
    assert [r["session"] for r in rows] == [first.id, second.id]
    for row in rows:
        # The existing fields keep their meaning: not decided, so no figures at all.
        assert row["state"] == "running" and row["decided"] is False
        assert not set(DECIDED_FIGURES) & set(row), row
    done, cut = (r["so_far"] for r in rows)
    # The parent's count at the fork is 0 (the seed): each spent its own count.
    assert done["tokens"] == first.tokens_used > 0
    assert cut["tokens"] == second.tokens_used > 0
    assert done["task_status"] == "done" and done["gate_passed"] is True
    assert done["failed_gates"] == 0 and done["stage"] and done["stages_done"] > 1
    assert cut["status"] == "stopped: interrupted" and cut["stop_reason"] == "interrupted"
    assert cut["gate_passed"] is None and cut["stages_done"] == 0
    assert cut["stage"] and cut["turns"] >= 1
    assert cut["summary"].startswith("undecided: stopped: interrupted, at ")
    assert f"{cut['tokens']:,} token(s) so far" in cut["summary"]

    # The stopped run's summary said the same of each: status, stage, turns, gate, tokens.
    for row in rows:
        line = f"attempts  T-001 · {row['session']}: {row['so_far']['summary']}"
        assert line in stopped.output, stopped.output

    table = run_cli("attempts", parent.id)
    assert table.returncode == 0, table.stdout + table.stderr
    text = " ".join(table.stdout.split())
    assert f"{second.id} undecided - - - - {cut['tokens']:,} so far" in text, table.stdout
    assert "undecided: its task done, waiting for the other attempts" in text, table.stdout
    assert "gate passed" in text and "gate not run yet" in text, table.stdout
    assert " running " not in text and " winner " not in text, table.stdout

    # No winner to replace: --pick refuses and says how to decide them.
    refused = run_cli("attempts", parent.id, "--pick", second.id, "-y")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "has not been decided yet" in refused.stderr
    assert f"tilth resume {parent.id}" in refused.stderr
    assert json.loads(run_cli("attempts", parent.id, "--json").stdout) == rows

    _web_shows_them_undecided(parent.id, second.id, rows)


def _web_shows_them_undecided(session_id: str, attempt: str, rows: list[dict[str, object]]) -> None:
    from tests.web.conftest import TOKEN, app_client

    with app_client(Authorization=f"Bearer {TOKEN}") as client:
        detail = client.get(f"/api/sessions/{session_id}").json()
        assert detail["attempts"] == rows
        refused = client.post(
            f"/api/sessions/{session_id}/attempts/pick", json={"session": attempt, "dry_run": True}
        )
        assert refused.status_code == 400, refused.text
        assert "has not been decided yet" in refused.json()["error"]


def test_an_attempt_waiting_for_its_place_is_listed_as_queued(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    """With ``--parallel 1`` the second attempt, waiting while the first ran, was listed as
    ``undecided: not running`` (and as ``stopped`` by ``tilth sessions``) mid-run."""
    import os
    import signal

    from tests.agent.support import model_env, team_server
    from tests.attempts.queue_support import wait_for
    from tests.attempts.support import seed_add, start_run
    from tilth.model.script import reply, tool_call
    from tilth.session.store import Session

    def busy(model: str, request: dict[str, object]) -> dict[str, object]:
        call = reply(None, tool_call("bash", command="true"))
        return {"type": "delay", "seconds": 0.2, "then": call}

    seeded = seed_add(sessions_dir, repo)
    env = {**os.environ, **model_env("", TILTH_SANDBOX="off", TILTH_MAX_ITERATIONS_PER_TASK="0")}
    with team_server(busy) as server:
        env["TILTH_BASE_URL"] = server.base_url
        run = start_run(repo, env, tmp_path, "--attempts", "2", "--parallel", "1")
        try:

            def started() -> list[str]:
                found = [e.payload for e in seeded.events() if e.type == "attempts_started"]
                return list(found[0]["attempts"]) if found else []

            first, second = (Session(i, sessions_dir / i) for i in wait_for(started, 120, "forks"))
            wait_for(lambda: first.tokens_used > 0, 120, "attempt 1's first model call")
            during = json.loads(run_cli("attempts", seeded.session.id, "--json").stdout)
            os.killpg(run.pid, signal.SIGINT)
            output, _ = run.communicate(timeout=90)
        finally:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
                run.wait()
    assert run.returncode == 130, output
    waiting = {row["session"]: row["so_far"] for row in during}
    assert waiting[first.id]["status"] == "running", during
    assert waiting[second.id]["status"] == "queued", during
    assert waiting[second.id]["summary"].startswith("undecided: queued, waiting for a place")
    # Once the run is over nothing waits for a place.
    after = json.loads(run_cli("attempts", seeded.session.id, "--json").stdout)
    assert "queued" not in {row["so_far"]["status"] for row in after}, after
