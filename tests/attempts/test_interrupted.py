"""A best-of-N run stopped with Ctrl-C mid-attempts resumes the same attempts: nothing is
forked twice, every attempt finishes its task, and each stage commit lands once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent.support import model_env, team_server
from tests.attempts.queue_support import slow, wait_for
from tests.attempts.support import RIGHT, differing_team, seed_add, start_run
from tests.conftest import run_cli
from tilth.session.pipelines import L1_STAGES


@pytest.mark.slow
def test_ctrl_c_mid_attempts_then_resume(repo: Path, sessions_dir: Path, tmp_path: Path) -> None:
    seeded = seed_add(sessions_dir, repo)
    env = {
        **os.environ,
        **model_env("", TILTH_SANDBOX="off", TILTH_MAX_ITERATIONS_PER_TASK="4"),
    }
    with team_server(slow(differing_team(right=2, count=2), 0.2)) as server:
        env["TILTH_BASE_URL"] = server.base_url
        run = start_run(repo, env, tmp_path, "--attempts", "2")

        def started() -> list[str]:
            found = [e.payload for e in seeded.events() if e.type == "attempts_started"]
            return list(found[0]["attempts"]) if found else []

        forked = wait_for(started, 90, "the attempts to be forked")
        wait_for(
            lambda: all(
                '"stage_completed"' in (sessions_dir / a / "events.jsonl").read_text()
                for a in forked
            ),
            90,
            "each attempt's first stage",
        )
        os.killpg(run.pid, signal.SIGINT)
        output, _ = run.communicate(timeout=90)
        assert run.returncode == 130, output
        assert not any(e.type == "attempt_selected" for e in seeded.events())

        again = run_cli("resume", seeded.session.id, "--attempts", "2", env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    selected = [e.payload for e in seeded.events() if e.type == "attempt_selected"]
    assert [a["session"] for a in selected[0]["attempts"]] == forked
    assert selected[0]["winner"] == forked[1]
    listed = json.loads(run_cli("sessions", "--json").stdout)
    assert sorted(s["id"] for s in listed if s.get("parent") == seeded.session.id) == sorted(forked)
    expected = [f"task/T-001: complete {stage} stage" for stage in L1_STAGES]
    assert seeded.subjects() == expected
    assert (seeded.worktree / "calc.py").read_text() == RIGHT["calc.py"]


def test_ctrl_c_while_the_attempts_are_forked_leaves_none_behind(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    """Each attempt is queued, and runs, as soon as it is forked; a Ctrl-C before the last
    was forked left those already made out of ``attempts_started``: never decided, their
    tokens in no cap, and a resume forked N more beside them. Then the resume went on with
    those made alone (best of fewer than asked): it forks the missing ones now."""
    seeded = seed_add(sessions_dir, repo)
    env = {**os.environ, **model_env("", TILTH_SANDBOX="off", TILTH_MAX_ITERATIONS_PER_TASK="4")}

    def made() -> list[str]:
        """The attempt sessions forked so far (their record written)."""
        return sorted(
            d.name
            for d in sessions_dir.iterdir()
            if d.name != seeded.session.id
            and '"attempt"'
            in ((d / "checkpoint.json").read_text() if (d / "checkpoint.json").is_file() else "")
        )

    with team_server(slow(differing_team(right=1, count=5), 0.2)) as server:
        env["TILTH_BASE_URL"] = server.base_url
        run = start_run(repo, env, tmp_path, "--attempts", "5", "--parallel", "1")
        wait_for(made, 90, "the first attempt to be forked")
        os.killpg(run.pid, signal.SIGINT)
        output, _ = run.communicate(timeout=90)
        assert run.returncode == 130, output
        forked = made()
        started = [e.payload for e in seeded.events() if e.type == "attempts_started"]
        # Those made are listed, but for one whose record was written as the Ctrl-C landed
        # (before the run could list it): the resume adopts it by its record (below).
        listed = set(started[-1]["attempts"]) if started else set()
        assert listed <= set(forked) and len(listed) >= len(forked) - 1, (listed, forked)
        for attempt in forked:  # one already running stopped at its next step, recorded
            kinds = [
                json.loads(line)["type"]
                for line in (sessions_dir / attempt / "events.jsonl").read_text().splitlines()
            ]
            ran = kinds[kinds.index("fork") + 1 :]
            assert "session_resume" not in ran or ran[-1] == "stop", (attempt, ran)

        again = run_cli("resume", seeded.session.id, env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(forked) < 5, "the Ctrl-C came while they were being forked"
    everyone = made()
    assert len(everyone) == 5 and set(forked) <= set(everyone), "the missing ones, once each"
    records = {
        a: json.loads((sessions_dir / a / "checkpoint.json").read_text())["attempt"]
        for a in everyone
    }
    by_number = sorted(everyone, key=lambda a: records[a]["number"])
    assert [records[a]["number"] for a in by_number] == [1, 2, 3, 4, 5]
    assert {records[a]["of"] for a in everyone} == {5}
    (start,) = {e.payload["checkpoint"] for e in seeded.events() if e.type == "attempts_started"}
    assert {records[a]["checkpoint"] for a in everyone} == {start}
    assert by_number[: len(forked)] == sorted(forked, key=lambda a: records[a]["number"])
    for attempt in forked:  # resumed where it stood, not forked again
        kinds = [
            json.loads(line)["type"]
            for line in (sessions_dir / attempt / "events.jsonl").read_text().splitlines()
        ]
        assert kinds.count("fork") == 1, (attempt, kinds)
    (selected,) = [e.payload for e in seeded.events() if e.type == "attempt_selected"]
    assert [a["session"] for a in selected["attempts"]] == by_number
    assert selected["winner"] == by_number[0]  # attempt 1 writes the right add()
    listed = json.loads(run_cli("attempts", seeded.session.id, "--json").stdout)
    assert [(r["session"], r["number"]) for r in listed] == [
        (a, n) for n, a in enumerate(by_number, 1)
    ]


def test_ctrl_c_abandons_the_model_calls_the_attempts_wait_on(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    """Each attempt heard of a Ctrl-C only at its next status line, after the reply in flight:
    against a real model on a loaded machine a reply took over a minute, the run gave up
    waiting after one, and the attempts ended with no ``stop`` recorded. The calls in flight
    are abandoned at once, as a plain run's is."""
    seeded = seed_add(sessions_dir, repo)
    env = {**os.environ, **model_env("", TILTH_SANDBOX="off", TILTH_MAX_ITERATIONS_PER_TASK="4")}
    with team_server(slow(differing_team(right=1, count=2), 600)) as server:
        env["TILTH_BASE_URL"] = server.base_url
        run = start_run(repo, env, tmp_path, "--attempts", "2")
        wait_for(lambda: len(server.requests) >= 2, 90, "both attempts to ask the model")
        os.killpg(run.pid, signal.SIGINT)
        output, _ = run.communicate(timeout=240)
    assert run.returncode == 130, output
    (started,) = [e.payload for e in seeded.events() if e.type == "attempts_started"]
    for attempt in started["attempts"]:
        events = [
            json.loads(line)
            for line in (sessions_dir / attempt / "events.jsonl").read_text().splitlines()
        ]
        cancelled = [e["payload"] for e in events if e["type"] == "model_call_cancelled"]
        assert cancelled and cancelled[-1]["reason"] == "interrupted", (attempt, output)
        assert events[-1]["type"] == "stop", (attempt, events[-1])
        assert events[-1]["payload"]["reason"] == "interrupted"


def test_a_run_killed_while_the_attempts_are_forked_resumes_with_all_of_them(
    repo: Path, sessions_dir: Path, tmp_path: Path
) -> None:
    """A ``kill -9`` (a lost machine, the OOM killer) while the attempts are forked leaves
    no ``attempts_started`` at all: the resume takes those made (their records name the
    task's start) and forks only the missing ones, rather than N more beside them."""
    seeded = seed_add(sessions_dir, repo)
    env = {**os.environ, **model_env("", TILTH_SANDBOX="off", TILTH_MAX_ITERATIONS_PER_TASK="4")}

    def made() -> list[str]:
        return sorted(
            d.name
            for d in sessions_dir.iterdir()
            if d.name != seeded.session.id
            and '"attempt"'
            in ((d / "checkpoint.json").read_text() if (d / "checkpoint.json").is_file() else "")
        )

    with team_server(slow(differing_team(right=1, count=3), 0.2)) as server:
        env["TILTH_BASE_URL"] = server.base_url
        run = subprocess.Popen(
            [sys.executable, "-m", "tilth", "run", str(repo), "--attempts", "3", "--parallel", "1"],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            wait_for(made, 90, "the first attempt to be forked")
        finally:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=30)
        forked = made()
        assert not any(e.type == "attempts_started" for e in seeded.events()), forked

        again = run_cli("resume", seeded.session.id, env=env, cwd=tmp_path, timeout=240)
    assert again.returncode == 0, again.stdout + again.stderr
    everyone = made()
    assert len(everyone) == 3 and set(forked) <= set(everyone), (forked, everyone)
    records = {
        a: json.loads((sessions_dir / a / "checkpoint.json").read_text())["attempt"]
        for a in everyone
    }
    by_number = sorted(everyone, key=lambda a: records[a]["number"])
    assert [records[a]["number"] for a in by_number] == [1, 2, 3]
    (selected,) = [e.payload for e in seeded.events() if e.type == "attempt_selected"]
    assert [a["session"] for a in selected["attempts"]] == by_number
    assert selected["winner"] == by_number[0]
    expected = [f"task/T-001: complete {stage} stage" for stage in L1_STAGES]
    assert seeded.subjects() == expected
