"""Go-backs without reset --hard, attacked: every restore equals the old guarantee."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.timeline.conftest import World
from tests.timeline.rewind.test_capture_rewind import Driver, _cli, _session
from tests.timeline.simrun import worktree_of
from tests.trees import tree_hash


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_kinds_change_across_commits_and_every_checkpoint_comes_back(
    tilth_home: Path, tmp_path: Path
) -> None:
    sessions_dir = tilth_home / "sessions"
    d = Driver(_session(tmp_path, sessions_dir))
    sid = d.session.id
    commit = " && git add -A && git commit -qm c"
    ids = [
        d.turn(("bash", {"command": "mkdir -p p && echo a > p/a && echo s > s.sh" + commit})),
        d.turn(("bash", {"command": "rm -rf p && echo file > p && chmod +x s.sh" + commit})),
        d.turn(("bash", {"command": "ln -s s.sh l && rm p && mkdir p && echo b > p/b"})),
        d.turn(("bash", {"command": "git add -A && git commit -qm c3 && rm l && echo l > l"})),
        d.turn(("bash", {"command": "chmod -x s.sh && rm -rf p && ln -s /tmp p"})),
    ]
    for target in [ids[0], ids[4], ids[2], ids[1], ids[3], ids[0], ids[4]]:
        out = _ok(_cli(sessions_dir, "rewind", sid, "--to", target, "--scope", "code", "-y"))
        assert "files you changed" not in out, out  # the user changed nothing
        assert tree_hash(d.worktree) == d.trees[target], target
        # The index is HEAD's, as reset --hard left it: nothing staged, no stale entry.
        assert _git(d.worktree, "diff", "--cached", "--name-only") == "", target


def test_user_edits_survive_rewind_undo_and_redo(tilth_home: Path, tmp_path: Path) -> None:
    sessions_dir = tilth_home / "sessions"
    d = Driver(_session(tmp_path, sessions_dir))
    sid = d.session.id
    first = d.turn(("write_file", {"path": "a.txt", "content": "a1\n"}))
    d.turn(
        ("write_file", {"path": "a.txt", "content": "a2\n"}),
        ("write_file", {"path": "b.txt", "content": "b2\n"}),
        ("bash", {"command": "git add -A && git commit -qm two"}),
    )
    d.turn(("write_file", {"path": "c.txt", "content": "c3\n"}))
    wt = d.worktree
    (wt / "a.txt").write_text("mine\n")  # inside the restored set
    (wt / "README.md").unlink()  # outside it (README is the same in both)
    (wt / "new.txt").write_text("created\n")  # new, outside
    (wt / "c.txt").write_text("mine c\n")  # in the set: deleted by the restore otherwise
    before = tree_hash(wt)
    _ok(_cli(sessions_dir, "rewind", sid, "--to", first, "-y"))
    rewound = tree_hash(wt)
    assert (wt / "a.txt").read_text() == "mine\n"
    assert (wt / "c.txt").read_text() == "mine c\n"
    assert not (wt / "README.md").exists()
    assert (wt / "new.txt").read_text() == "created\n"
    assert not (wt / "b.txt").exists()
    _ok(_cli(sessions_dir, "rewind", sid, "--undo", "-y"))
    assert tree_hash(wt) == before
    _ok(_cli(sessions_dir, "rewind", sid, "--undo", "-y"))
    assert tree_hash(wt) == rewound


def _git(worktree: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=worktree, capture_output=True, text=True, check=True
    ).stdout


def test_a_planted_link_to_outside_is_never_written_through(
    tilth_home: Path, tmp_path: Path
) -> None:
    sessions_dir = tilth_home / "sessions"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("precious\n")
    (outside / "g").write_text("precious g\n")
    d = Driver(_session(tmp_path, sessions_dir))
    sid = d.session.id
    ids = [
        d.turn(("bash", {"command": "mkdir d && echo in > d/f && echo g > d/g"})),
        d.turn(("bash", {"command": f"rm -rf d && ln -s {outside} d"})),
        d.turn(("bash", {"command": "git add -A && git commit -qm link"})),
        d.turn(("bash", {"command": "rm d && mkdir d && echo x > d/f"})),
    ]
    for target in [ids[0], ids[1], ids[3], ids[0], ids[2], ids[3], ids[1], ids[0]]:
        _ok(_cli(sessions_dir, "rewind", sid, "--to", target, "--scope", "code", "-y"))
        assert tree_hash(d.worktree) == d.trees[target], target
        assert sorted(p.name for p in outside.iterdir()) == ["f", "g"]
        assert (outside / "f").read_text() == "precious\n"
        assert (outside / "g").read_text() == "precious g\n"


def test_a_hand_commit_and_staged_files_come_back_with_undo(
    tilth_home: Path, tmp_path: Path
) -> None:
    sessions_dir = tilth_home / "sessions"
    d = Driver(_session(tmp_path, sessions_dir))
    sid = d.session.id
    wt = d.worktree
    first = d.turn(("write_file", {"path": "a.txt", "content": "a1\n"}))
    d.turn(("write_file", {"path": "a.txt", "content": "a2\n"}))
    (wt / "a.txt").write_text("mine\n")
    (wt / "hand.txt").write_text("hand\n")
    _git(wt, "add", "-A")
    _git(wt, "commit", "-qm", "by hand")
    (wt / "staged.txt").write_text("staged\n")
    _git(wt, "add", "staged.txt")
    (wt / "README.md").write_text("unstaged\n")
    before, head = tree_hash(wt), _git(wt, "rev-parse", "HEAD")
    _ok(_cli(sessions_dir, "rewind", sid, "--to", first, "-y"))
    rewound = tree_hash(wt)
    assert (wt / "staged.txt").read_text() == "staged\n"
    assert (wt / "README.md").read_text() == "unstaged\n"
    _ok(_cli(sessions_dir, "rewind", sid, "--undo", "-y"))
    assert tree_hash(wt) == before
    assert _git(wt, "rev-parse", "HEAD") == head
    _ok(_cli(sessions_dir, "rewind", sid, "--undo", "-y"))
    assert tree_hash(wt) == rewound


def test_undo_returns_a_link_to_outside_without_copying_through_it(
    tilth_home: Path, tmp_path: Path
) -> None:
    sessions_dir = tilth_home / "sessions"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("precious\n")
    d = Driver(_session(tmp_path, sessions_dir))
    sid = d.session.id
    first = d.turn(("bash", {"command": "mkdir d && echo in > d/f"}))
    second = d.turn(("bash", {"command": f"rm -rf d && ln -s {outside} d"}))
    _ok(_cli(sessions_dir, "rewind", sid, "--to", first, "--scope", "code", "-y"))
    assert tree_hash(d.worktree) == d.trees[first]
    _ok(_cli(sessions_dir, "rewind", sid, "--undo", "-y"))
    assert tree_hash(d.worktree) == d.trees[second]
    _ok(_cli(sessions_dir, "rewind", sid, "--undo", "-y"))
    assert tree_hash(d.worktree) == d.trees[first]
    assert [p.name for p in outside.iterdir()] == ["f"]
    assert (outside / "f").read_text() == "precious\n"


@pytest.mark.parametrize("step", ["before", "code", "code+", "state"])
def test_a_kill_around_the_code_step_is_completed_with_the_users_edits_kept(
    tilth_home: Path, tmp_path: Path, step: str
) -> None:
    sessions_dir = tilth_home / "sessions"
    d = Driver(_session(tmp_path, sessions_dir))
    sid, wt = d.session.id, d.worktree
    first = d.turn(("write_file", {"path": "a.txt", "content": "a1\n"}))
    d.turn(
        ("bash", {"command": "mkdir -p x && echo 2 > x/y && rm a.txt && mkdir a.txt"}),
        ("bash", {"command": "echo 2 > a.txt/in && git add -A && git commit -qm two"}),
    )
    d.turn(("write_file", {"path": "b.txt", "content": "b3\n"}))
    (wt / "b.txt").write_text("mine\n")
    (wt / "free.txt").write_text("free\n")
    killed = _cli(sessions_dir, "rewind", sid, "--to", first, "-y", TILTH_FAULT_AT=step)
    assert killed.returncode != 0
    _ok(_cli(sessions_dir, "checkpoints", sid))
    assert (wt / "b.txt").read_text() == "mine\n"
    assert (wt / "free.txt").read_text() == "free\n"
    (wt / "b.txt").unlink()
    (wt / "free.txt").unlink()
    assert tree_hash(wt) == d.trees[first]
    assert _git(wt, "diff", "--cached", "--name-only") == ""


def test_a_users_file_where_a_restored_directory_goes_is_kept_not_deleted(
    tilth_home: Path, tmp_path: Path
) -> None:
    sessions_dir = tilth_home / "sessions"
    d = Driver(_session(tmp_path, sessions_dir))
    sid, wt = d.session.id, d.worktree
    first = d.turn(("write_file", {"path": "p/b", "content": "b\n"}))
    d.turn(("bash", {"command": "rm -rf p"}))
    (wt / "p").write_text("my notes\n")  # the user's own file, where p/ was
    before = tree_hash(wt)
    out = _ok(_cli(sessions_dir, "rewind", sid, "--to", first, "-y"))
    assert (wt / "p").read_text() == "my notes\n", out
    assert "files you changed, kept as they are" in out
    _ok(_cli(sessions_dir, "rewind", sid, "--undo", "-y"))
    assert tree_hash(wt) == before
    _ok(_cli(sessions_dir, "rewind", sid, "--to", first, "--force", "-y"))
    assert tree_hash(wt) == d.trees[first]


def test_a_users_directory_where_a_restored_file_goes_is_kept_not_deleted(
    tilth_home: Path, tmp_path: Path
) -> None:
    sessions_dir = tilth_home / "sessions"
    d = Driver(_session(tmp_path, sessions_dir))
    sid, wt = d.session.id, d.worktree
    first = d.turn(("write_file", {"path": "p", "content": "agent's\n"}))
    d.turn(("bash", {"command": "rm p"}))
    (wt / "p").mkdir()
    (wt / "p" / "mine").write_text("my notes\n")  # the user's own files, where p was
    before = tree_hash(wt)
    out = _ok(_cli(sessions_dir, "rewind", sid, "--to", first, "-y"))
    assert (wt / "p" / "mine").read_text() == "my notes\n", out
    assert "files you changed, kept as they are" in out
    _ok(_cli(sessions_dir, "rewind", sid, "--undo", "-y"))
    assert tree_hash(wt) == before
    _ok(_cli(sessions_dir, "rewind", sid, "--to", first, "--force", "-y"))
    assert tree_hash(wt) == d.trees[first]


def test_kept_files_block_committed_paths_too(tilth_home: Path, tmp_path: Path) -> None:
    sessions_dir = tilth_home / "sessions"
    d = Driver(_session(tmp_path, sessions_dir))
    sid, wt = d.session.id, d.worktree
    commit = " && git add -A && git commit -qm c"
    first = d.turn(("bash", {"command": "mkdir p && echo b > p/b && echo q > q" + commit}))
    d.turn(("bash", {"command": "rm -rf p q" + commit}))
    (wt / "p").write_text("my notes\n")
    (wt / "q").mkdir()
    (wt / "q" / "mine").write_text("mine\n")
    before = tree_hash(wt)
    _ok(_cli(sessions_dir, "rewind", sid, "--to", first, "-y"))
    assert (wt / "p").read_text() == "my notes\n"
    assert (wt / "q" / "mine").read_text() == "mine\n"
    _ok(_cli(sessions_dir, "rewind", sid, "--undo", "-y"))
    assert tree_hash(wt) == before


def test_restart_with_every_kind_of_dirty_file_is_undone_to_the_same_tree(
    world_clone: Callable[..., World],
) -> None:
    world = world_clone(("L1",), 1)
    sid = world.session.id
    wt = worktree_of(world.session)
    (wt / "untracked.txt").write_text("u\n")
    (wt / "staged.txt").write_text("s\n")
    _git(wt, "add", "staged.txt")
    (wt / "README.md").unlink()
    (wt / ".gitignore").chmod(0o755)
    (wt / "link").symlink_to("staged.txt")
    (wt / "deep" / "dir").mkdir(parents=True)
    (wt / "deep" / "dir" / "f").write_text("f\n")
    before = tree_hash(wt)
    _ok(world.cli_here("restart", sid, "T-001", "--from", "implementing", "-y"))
    restarted = tree_hash(wt)
    assert not (wt / "untracked.txt").exists()
    _ok(world.cli_here("rewind", sid, "--undo", "-y"))
    assert tree_hash(wt) == before
    _ok(world.cli_here("rewind", sid, "--undo", "-y"))
    assert tree_hash(wt) == restarted


def test_rewinding_across_many_commits_keeps_the_users_files(
    tilth_home: Path, tmp_path: Path
) -> None:
    sessions_dir = tilth_home / "sessions"
    d = Driver(_session(tmp_path, sessions_dir))
    sid, wt = d.session.id, d.worktree
    ids = []
    for n in range(12):
        cmd = f"mkdir -p m{n % 3} && echo {n} > m{n % 3}/f{n} && echo {n} > shared"
        if n % 4 == 3:
            cmd += f" && rm -rf m{(n + 1) % 3} && chmod +x shared"
        if n % 2:
            cmd += f" && git add -A && git commit -qm c{n}"
        ids.append(d.turn(("bash", {"command": cmd})))
    (wt / "mine.txt").write_text("mine\n")
    (wt / "shared").write_text("my shared\n")
    for target in [ids[0], ids[11], ids[5], ids[2], ids[8]]:
        _ok(_cli(sessions_dir, "rewind", sid, "--to", target, "--scope", "code", "-y"))
        assert (wt / "mine.txt").read_text() == "mine\n", target
        assert (wt / "shared").read_text() == "my shared\n", target
        (wt / "mine.txt").rename(tmp_path / "aside")  # out of the worktree, to compare
        (wt / "shared").rename(tmp_path / "aside2")
        state = d.trees[target]
        _ok(_cli(sessions_dir, "rewind", sid, "--to", target, "--scope", "code", "--force", "-y"))
        assert tree_hash(wt) == state, target
        (tmp_path / "aside").rename(wt / "mine.txt")
        (tmp_path / "aside2").rename(wt / "shared")
    before = tree_hash(wt)
    _ok(_cli(sessions_dir, "rewind", sid, "--to", ids[3], "--scope", "code", "-y"))
    _ok(_cli(sessions_dir, "rewind", sid, "--undo", "-y"))
    assert tree_hash(wt) == before


def test_users_files_stay_the_users_after_undo_and_redo(tilth_home: Path, tmp_path: Path) -> None:
    sessions_dir = tilth_home / "sessions"
    d = Driver(_session(tmp_path, sessions_dir))
    sid, wt = d.session.id, d.worktree
    first = d.turn(("write_file", {"path": "a.txt", "content": "a1\n"}))
    last = d.turn(("write_file", {"path": "a.txt", "content": "a2\n"}))
    (wt / "mine.txt").write_text("mine\n")
    _ok(_cli(sessions_dir, "rewind", sid, "--to", first, "-y"))
    _ok(_cli(sessions_dir, "rewind", sid, "--undo", "-y"))
    _ok(_cli(sessions_dir, "rewind", sid, "--to", last, "-y"))
    assert (wt / "mine.txt").read_text() == "mine\n"


def test_edits_made_after_an_undo_survive_the_redo_and_the_next_rewind(
    tilth_home: Path, tmp_path: Path
) -> None:
    sessions_dir = tilth_home / "sessions"
    d = Driver(_session(tmp_path, sessions_dir))
    sid, wt = d.session.id, d.worktree
    first = d.turn(("write_file", {"path": "a.txt", "content": "a1\n"}))
    d.turn(("write_file", {"path": "a.txt", "content": "a2\n"}))
    (wt / "mine.txt").write_text("mine\n")
    _ok(_cli(sessions_dir, "rewind", sid, "--to", first, "-y"))
    _ok(_cli(sessions_dir, "rewind", sid, "--undo", "-y"))
    (wt / "a.txt").write_text("edited after the undo\n")  # the redo writes a.txt
    (wt / "late.txt").write_text("late\n")
    redo = _ok(_cli(sessions_dir, "rewind", sid, "--undo", "-y"))
    assert "a.txt" in redo, redo  # listed as the user's, kept
    assert (wt / "a.txt").read_text() == "edited after the undo\n"
    assert (wt / "late.txt").read_text() == "late\n"
    assert (wt / "mine.txt").read_text() == "mine\n"
    _ok(_cli(sessions_dir, "rewind", sid, "--to", first, "--force", "-y"))
    assert (wt / "a.txt").read_text() == "a1\n"
    assert not (wt / "mine.txt").exists()  # forced: the checkpoint's exact tree


def test_a_deletion_under_a_link_to_a_directory_never_deletes_what_it_points_at(
    tilth_home: Path, tmp_path: Path
) -> None:
    sessions_dir = tilth_home / "sessions"
    d = Driver(_session(tmp_path, sessions_dir))
    sid, wt = d.session.id, d.worktree
    commit = " && git add -A && git commit -qm c"
    ids = [
        d.turn(("bash", {"command": "mkdir lib src && echo x > lib/x && echo s > src/x" + commit})),
        d.turn(("bash", {"command": "rm -rf lib && ln -s src lib"})),
        d.turn(("bash", {"command": "true" + commit})),
    ]
    for target in [ids[1], ids[0], ids[2], ids[1], ids[2], ids[0]]:
        _ok(_cli(sessions_dir, "rewind", sid, "--to", target, "--scope", "code", "-y"))
        assert (wt / "src" / "x").read_text() == "s\n", target
        assert tree_hash(wt) == d.trees[target], target
