"""``tilth rewind`` in all three scopes, ``--dry-run`` and ``tilth checkpoints``, via the CLI."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import time
from collections.abc import Callable

from tests.sessionview import SessionView
from tests.timeline.conftest import World
from tests.timeline.simrun import fingerprint, observe, timeline_of, worktree_of
from tests.warm_cli import shared
from tilth import git
from tilth.timeline import Recorder, list_checkpoints, plan_rewind, resolve_checkpoint
from tilth.timeline.record.checkpoints import CHECKPOINT_FILE_SCHEMA
from tilth.timeline.record.state_capture import count_lines, log_tail, thread_heads


def test_scope_both_makes_it_as_if_nothing_after_the_checkpoint_happened(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone()
    session = world.session
    assert world.sim is not None
    target = resolve_checkpoint(session, "T-002")
    later = [c.id for c in list_checkpoints(session) if c.seq > target.seq]
    result = world.cli("rewind", session.id, "--to", "T-002", "-y")
    assert result.returncode == 0, result.stderr
    now, then = observe(session), world.sim.seen[target.id]
    assert (now.tree, now.head, now.statuses) == (then.tree, then.head, then.statuses)
    assert now.events == then.events + 1
    rewind = SessionView(session).events()[-1]
    assert rewind.type == "rewind"
    payload = rewind.payload
    assert payload["to"] == target.id and payload["scope"] == "both"
    assert payload["dropped"]["commits_dropped"] == 4
    # harness state, conversation and timeline are back too
    assert thread_heads(session.threads.directory) == target.threads
    assert session.record().status == target.state["status"] == "running"
    assert session.tokens_used == target.state["tokens_used"]
    ledger = {p.stem: count_lines(p) for p in (session.dir / "ledger").glob("*.jsonl")}
    assert ledger == target.state["ledger"]
    tasks = {p.stem: json.loads(p.read_text()) for p in session.tasks_dir.glob("*.json")}
    assert tasks == target.state["tasks"]
    assert count_lines(session.progress_path) == target.state["progress_lines"]
    remaining = [c.id for c in timeline_of(session)]
    assert [c.kind for c in list_checkpoints(session)][-1] == "before-rewind"
    assert remaining[-1] == target.id and not set(later) & set(remaining)
    # a checkpoint recorded afterwards gets a fresh id: ids are never reused
    fresh = Recorder(session, worktree_of(session)).task_start("T-002")
    assert fresh.seq > max(int(c[3:]) for c in later)


def test_scope_code_restores_files_only_and_notes_it_in_the_conversation(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone()
    session = world.session
    assert world.sim is not None
    target = resolve_checkpoint(session, "T-001/planning")
    before = observe(session)
    checkpoints = [c.id for c in list_checkpoints(session)]
    heads = thread_heads(session.threads.directory)
    result = world.cli("rewind", session.id, "--to", target.id, "--scope", "code", "-y")
    assert result.returncode == 0, result.stderr
    now = observe(session)
    assert now.head == target.head and now.tree == world.sim.seen[target.id].tree
    # No done task without its code: the tasks whose stage commits were dropped wind back
    # (T-001 keeps its planning stage). The simulated run names its threads its own way,
    # so dropping the redone stages' worker threads is tested with the real run
    # (tests/timeline/test_code_rewind_tasks.py).
    assert before.statuses == {"T-001": "done", "T-002": "done"}
    assert now.statuses == {"T-001": "in_progress", "T-002": "pending"}
    assert "T-002: the commits of" in result.stdout
    assert now.events == before.events + 1
    assert [c.id for c in timeline_of(session)] == checkpoints
    after = thread_heads(session.threads.directory)
    changed = {k for k, v in after.items() if heads.get(k) != v}
    assert len(changed) == 1
    note = session.threads.get(changed.pop()).read()[-1]
    assert target.id in note.message["content"] and note.meta["kind"] == "rewind_note"


def test_scope_conversation_keeps_files_and_cuts_threads_state_and_log(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone()
    session = world.session
    assert world.sim is not None
    target = resolve_checkpoint(session, "T-001/code_review")
    before = observe(session)
    result = world.cli("rewind", session.id, "--to", target.id, "--scope", "conversation", "-y")
    assert result.returncode == 0, result.stderr
    now = observe(session)
    assert (now.tree, now.head) == (before.tree, before.head)
    assert now.statuses == world.sim.seen[target.id].statuses
    assert now.events == world.sim.seen[target.id].events + 1
    assert thread_heads(session.threads.directory) == target.threads
    assert timeline_of(session)[-1].id == target.id


def test_dry_run_prints_the_plan_and_changes_nothing(world_clone: Callable[..., World]) -> None:
    world = world_clone()
    session = world.session
    (worktree_of(session) / "README.md").write_text("edited by the user\n")
    before = fingerprint(session)
    result = world.cli("rewind", session.id, "--to", "T-001/planning", "--dry-run")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "dry run: nothing was changed" in out
    assert "commits dropped (7)" in out, out
    assert "task/T-002: complete verifying stage" in out
    assert "delete  src/t-001_implementing.py" in out
    assert "    README.md" in out.splitlines(), "the user's edit is listed as a conflict"
    assert "events:" in out and "stage_completed x7" in out
    assert "T-001: done -> in_progress" in out
    assert fingerprint(session) == before


def test_without_to_and_without_a_terminal_it_names_the_flag(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone()
    result = world.cli("rewind", world.session.id)
    assert result.returncode == 2
    assert "--to" in result.stderr and "Traceback" not in result.stderr
    bad = world.cli("rewind", world.session.id, "--to", "cp-9999")
    assert bad.returncode == 2 and "no checkpoint 'cp-9999'" in bad.stderr


def test_checkpoints_lists_the_timeline_and_survives_a_corrupt_file(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone()
    session = world.session
    table = world.cli("checkpoints", session.id)
    assert table.returncode == 0, table.stderr
    assert "cp-0001" in table.stdout and "T-002/verifying" in table.stdout
    (session.dir / "timeline" / "checkpoints" / "cp-0003.json").write_text("{torn")
    result = world.cli("checkpoints", session.id, "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    ids = [r["id"] for r in rows]
    assert "cp-0003" not in ids and "cp-0002" in ids and "cp-0004" in ids
    assert "cp-0003.json: unreadable" in result.stderr
    kinds = {r["kind"] for r in rows}
    assert kinds == {"seed", "task_start", "stage", "turn"}
    implementing = next(r for r in rows if r["label"] == "T-001 implementing done")
    assert implementing["files_changed"] == ["src/t-001_implementing.py"]
    dirty_turn = next(r for r in rows if r["label"] == "implementing turn 1")
    assert "src/t-001_implementing.py" in dirty_turn["files_changed"]


def test_without_an_observer_a_dirty_turn_records_its_gap(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone(run=False)
    worktree = worktree_of(world.session)
    (worktree / "notes.txt").write_text("uncommitted\n")
    recorder = Recorder(world.session, worktree)
    recorder.observer = None
    cp = recorder.turn("worker", task_id="T-001", stage="planning", turn=1, label="t1")
    assert cp.files_changed == ["notes.txt"]
    assert cp.gaps and "not snapshotted" in cp.gaps[0]
    plan = plan_rewind(world.session, cp, "both")
    assert any("not snapshotted" in w for w in plan.warnings)


def test_recorder_notes_log_position_and_state_without_scanning(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone(run=False)
    session = world.session
    session.ledger.append("T-001", {"verdict": "reject"})
    session.threads.get("worker-T-001").append({"role": "user", "content": "hi"})
    session.log("model_call", n=1)
    cp = Recorder(session, worktree_of(session)).turn(
        "worker", task_id="T-001", stage="planning", turn=1, label="first turn"
    )
    size, seq = log_tail(session.events.path)
    assert (cp.event_offset, cp.event_seq) == (size, seq)
    assert cp.id == "cp-0002" and cp.kind == "turn" and cp.actor == "worker"
    assert cp.state["ledger"] == {"T-001": 1}
    assert cp.threads["worker-T-001"] == "worker-T-001#1"
    assert cp.head == git.head(worktree_of(session))
    stored = json.loads((session.dir / "timeline/checkpoints/cp-0002.json").read_text())
    assert stored["schema"] == CHECKPOINT_FILE_SCHEMA and stored["overlay"] == {}
    assert resolve_checkpoint(session, "latest").id == "cp-0002"
    assert resolve_checkpoint(session, "seed").id == "cp-0001"
    assert resolve_checkpoint(session, "2").id == "cp-0002"


def test_on_a_terminal_without_to_a_numbered_picker_chooses(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone()
    session = world.session
    newest_first = list(reversed(list_checkpoints(session)))
    env = {**os.environ, "TILTH_SESSIONS_DIR": str(world.sessions_dir)}
    code, text = run_on_terminal(["rewind", session.id], [(b"> ", b"3"), (b"[y/N]", b"y")], env)
    assert code == 0, text
    assert "Rewind to which checkpoint?" in text and "0)  cancel" in text
    # The number typed is the checkpoint's own number, as `tilth checkpoints` shows it.
    chosen = resolve_checkpoint(session, "3")
    assert chosen.id == "cp-0003" and f" 3) {chosen.id}" in text
    # Labels line up (options 1-9 share one prefix width).
    rows = [next(ln for ln in text.splitlines() if f") {cp.id} " in ln) for cp in newest_first[:9]]
    starts = {row.rindex(cp.label) for row, cp in zip(rows, newest_first, strict=False)}
    assert len(starts) == 1, rows
    assert timeline_of(session)[-1].id == chosen.id
    assert git.head(worktree_of(session)) == chosen.head


def run_on_terminal(
    args: list[str], answers: list[tuple[bytes, bytes]], env: dict[str, str]
) -> tuple[int, str]:
    """Run the CLI on a pseudo-terminal, typing each answer once its prompt shows."""
    master, slave = pty.openpty()
    child = shared().popen(args, stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    output, pending = b"", list(answers)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                if child.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:  # every slave end closed: the child is done
                break
            if not chunk:
                break
            output += chunk
            if pending and pending[0][0] in output.rsplit(b"\n", 1)[-1]:
                os.write(master, pending.pop(0)[1] + b"\n")
        code = child.wait(timeout=30)
    finally:
        os.close(master)
        if child.poll() is None:
            child.kill()
            child.wait()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", output.decode("utf-8", "replace"))
    return code, text.replace("\r\n", "\n")


def test_declining_the_rewind_says_nothing_was_changed_without_error(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone()
    session = world.session
    before = list_checkpoints(session)[-1].id
    env = {**os.environ, "TILTH_SESSIONS_DIR": str(world.sessions_dir)}
    code, text = run_on_terminal(["rewind", session.id], [(b"> ", b"2"), (b"[y/N]", b"n")], env)
    assert code == 1, text
    assert "nothing was changed" in text and "error" not in text.lower()
    assert list_checkpoints(session)[-1].id == before


WHOLE_TREE = ("git status", "git reset --hard", "git clean", "git ls-files", "git add -A")
"""Git commands whose cost follows the size of the repository (each walks the worktree)."""


def _git_commands(trace: str) -> list[str]:
    marker = "trace: built-in: "
    return [line.split(marker, 1)[1] for line in trace.splitlines() if marker in line]


def test_a_confirmed_rewind_reads_only_what_differs_and_a_dry_run_lists_every_edit(
    world_clone: Callable[..., World], tmp_path: os.PathLike[str]
) -> None:
    world = world_clone()
    session = world.session
    assert world.sim is not None
    target = resolve_checkpoint(session, "T-001/implementing")
    worktree = worktree_of(session)
    written = {rel for _, rel in plan_rewind(session, target, "both").files}
    mine = sorted(written)[0]
    (worktree / mine).write_text("the user's version\n")
    (worktree / "README.md").write_text("edited by the user, far from the rewind\n")
    (worktree / "notes.txt").write_text("an untracked file of the user's\n")

    trace = os.path.join(tmp_path, "dry.trace")
    dry = world.cli("rewind", session.id, "--to", target.id, "--dry-run", GIT_TRACE=trace)
    assert dry.returncode == 0, dry.stderr
    # The survey a person reads walks the worktree once and lists every edit since.
    assert any(c.startswith("git status") for c in _git_commands(open(trace).read()))
    for rel in (mine, "README.md", "notes.txt"):
        assert f"    {rel}" in dry.stdout.splitlines(), dry.stdout

    trace = os.path.join(tmp_path, "run.trace")
    done = world.cli("rewind", session.id, "--to", target.id, "-y", GIT_TRACE=trace)
    assert done.returncode == 0, done.stderr
    commands = _git_commands(open(trace).read())
    walks = [c for c in commands if c.startswith(WHOLE_TREE)]
    assert commands and not walks, walks
    # Everything the rewind writes is the target's; every edit of the user's is kept.
    assert (worktree / mine).read_text() == "the user's version\n"
    assert (worktree / "README.md").read_text().startswith("edited by the user")
    assert (worktree / "notes.txt").is_file()
    assert f"    {mine}" in done.stdout.splitlines(), done.stdout
    # --force gives the exact tree of the checkpoint (it walks: it overwrites every edit).
    forced = world.cli("rewind", session.id, "--to", target.id, "--force", "-y")
    assert forced.returncode == 0, forced.stderr
    assert observe(session).tree == world.sim.seen[target.id].tree
