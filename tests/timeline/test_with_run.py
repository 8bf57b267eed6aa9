"""Go back, then go on: the real ``tilth run``/``resume`` after rewind, restart and reset.

A scripted team on a loopback fake server does the work; the timeline verbs run
through the real CLI in between, and each following run/resume must finish
cleanly from the point the verb returned to.
"""

from __future__ import annotations

from pathlib import Path

from agent.support import TASKS, model_env, recipes, seed_session, team_server, tilth

from tilth import git
from tilth.demo.script import Team
from tilth.session.pipelines import L1_STAGES
from tilth.timeline import Recorder, list_checkpoints, resolve_checkpoint


def _subjects(worktree: Path, base: str) -> list[str]:
    out = git.git("log", "--format=%s", f"{base}..HEAD", cwd=worktree)
    return list(reversed(out.splitlines()))


def test_resume_and_run_continue_after_every_go_back_verb(repo: Path, sessions_dir: Path) -> None:
    seeded = seed_session(sessions_dir, repo, TASKS[:1])
    Recorder(seeded.session, seeded.worktree).seed()
    sid = seeded.session.id
    full = [f"task/T-001: complete {stage} stage" for stage in L1_STAGES]
    with team_server(Team(recipes())) as server:
        env = model_env(server.base_url)
        first = tilth("run", str(repo), env=env)
        assert first.returncode == 0, first.stdout + first.stderr
        kinds = {c.kind for c in list_checkpoints(seeded.session)}
        assert {"seed", "task_start", "stage", "turn"} <= kinds

        # rewind to T-001's planning checkpoint, then resume: the task carries on from there
        back = tilth("rewind", sid, "--to", "T-001/planning", "-y", env=env)
        assert back.returncode == 0, back.stderr
        assert seeded.statuses()["T-001"] == "in_progress"
        assert seeded.session.status == "running"
        assert _subjects(seeded.worktree, seeded.seed_sha) == full[:1]
        again = tilth("resume", sid, env=env)
        assert again.returncode == 0, again.stdout + again.stderr
        assert _subjects(seeded.worktree, seeded.seed_sha) == full
        assert seeded.session.status == "all_done"

        # restart T-001 from code review: code review and verifying run again
        redo = tilth("restart", sid, "T-001", "--from", "code_review", "-y", env=env)
        assert redo.returncode == 0, redo.stderr
        head = resolve_checkpoint(seeded.session, "T-001/implementing").head
        assert git.head(seeded.worktree) == head
        assert seeded.statuses() == {"T-001": "pending"}
        resumed = tilth("resume", sid, env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert _subjects(seeded.worktree, seeded.seed_sha) == full
        assert seeded.statuses() == {"T-001": "done"}

        # reset to the seed, then a plain `tilth run <workspace>` picks it up as prepared
        reset = tilth("reset", "--to-seed", sid, "-y", env=env)
        assert reset.returncode == 0, reset.stderr
        assert git.head(seeded.worktree) == seeded.seed_sha
        assert seeded.session.status == "prepared"
        rerun = tilth("run", str(repo), env=env)
        assert rerun.returncode == 0, rerun.stdout + rerun.stderr
        assert _subjects(seeded.worktree, seeded.seed_sha) == full
        starts = [e for e in seeded.events() if e.type == "session_start"]
        assert [e.payload.get("phase") for e in starts] == ["prep-feature", "run"]
