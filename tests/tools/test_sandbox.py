"""``bash`` inside the sandbox, each backend: one writable directory, hidden state, no escape."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest
from security.conftest import MATRIX_PARAMS, require_backend

from tilth.config import load_settings
from tilth.tools import ToolBox, landlock
from tilth.tools.sandbox import SandboxUnavailable, make_sandbox, sandbox_for, sandbox_status

DENIED = ("Read-only file system", "Permission denied", "No such file")
"""How each backend says no: bubblewrap hides or mounts read-only, Landlock refuses."""


@pytest.fixture(params=MATRIX_PARAMS)  # each test using it: marked sandbox_backend
def world(tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, Path]:
    """A home with a session dir holding the workspace, and a source repo with a .git dir."""
    require_backend(str(request.param))
    home = tmp_path / "home"
    session = home / "sessions" / "s1"
    ws = session / "workspace"
    ws.mkdir(parents=True)
    (session / "prd.json").write_text('[{"id": "T-001", "status": "pending"}]\n')
    (home / ".env").write_text("TILTH_API_KEY=sk-hidden-in-home\n")
    source = tmp_path / "source"
    (source / ".git").mkdir(parents=True)
    (source / ".git" / "config").write_text("[core]\n")
    (source / "venv-marker.txt").write_text("project env\n")
    return {
        "home": home,
        "session": session,
        "ws": ws,
        "source": source,
        "backend": Path(str(request.param)),
    }


def _box(world: dict[str, Path], *, network: bool = True, timeout: float = 20) -> ToolBox:
    sandbox = make_sandbox(
        world["ws"],
        hidden=[world["home"], world["session"]],
        readable=[world["source"], world["source"] / ".git", Path(sys.prefix)],
        network=network,
        backend=str(world["backend"]),
    )
    return ToolBox(world["ws"], sandbox=sandbox, bash_timeout=timeout)


def _run(box: ToolBox, command: str) -> str:
    return box.dispatch("bash", {"command": command}).result


def test_the_workspace_is_writable_and_nothing_else(world: dict[str, Path]) -> None:
    box = _run(_box(world), "echo made > made.txt && cat made.txt; touch /etc/x 2>&1; pwd")
    assert "made\n" in box
    assert "Read-only file system" in box or "Permission denied" in box
    assert (world["ws"] / "made.txt").read_text() == "made\n"
    assert not Path("/etc/x").exists()
    assert str(world["ws"].resolve()) in box


def test_session_state_and_tilth_home_are_invisible(world: dict[str, Path]) -> None:
    out = _run(_box(world), "cat ../prd.json; ls -a ..; cat " + str(world["home"] / ".env"))
    assert "No such file" in out or "Permission denied" in out
    assert "T-001" not in out and "sk-hidden-in-home" not in out
    assert (world["session"] / "prd.json").read_text().startswith("[")


def test_the_source_git_dir_is_read_only_but_readable(world: dict[str, Path]) -> None:
    git_dir = world["source"] / ".git"
    out = _run(_box(world), f"cat {git_dir}/config && echo x >> {git_dir}/config; echo rc=$?")
    assert "[core]" in out and "rc=1" in out
    assert (git_dir / "config").read_text() == "[core]\n"
    assert "project env" in _run(_box(world), f"cat {world['source']}/venv-marker.txt")


def test_a_repository_inside_the_workspace_keeps_its_git_dir_read_only(
    world: dict[str, Path],
) -> None:
    """A chat in a directory of several repositories: a hook planted in one of them would
    run unconfined at the person's next ``git commit`` there."""
    inner = world["ws"] / "projects" / "app" / ".git"
    (inner / "hooks").mkdir(parents=True)
    (inner / "config").write_text("[core]\n")
    (world["ws"] / "projects" / "app" / "main.py").write_text("print(1)\n")
    out = _run(
        _box(world),
        "echo evil > projects/app/.git/hooks/pre-commit; echo rc=$?; "
        "echo x >> projects/app/.git/config; echo rc=$?; "
        "echo changed > projects/app/main.py; cat projects/app/.git/config",
    )
    assert out.count("rc=1") == 2, out
    assert "[core]" in out
    assert not (inner / "hooks" / "pre-commit").exists()
    assert (inner / "config").read_text() == "[core]\n"
    assert (world["ws"] / "projects" / "app" / "main.py").read_text() == "changed\n"


def test_tmp_is_private(world: dict[str, Path], tmp_path: Path) -> None:
    if str(world["backend"]) == "landlock":
        return _landlock_tmp_is_private(world)
    host = Path("/tmp") / f"tilth-host-{os.getpid()}.txt"
    made = Path("/tmp") / f"tilth-made-in-sandbox-{os.getpid()}.txt"
    host.write_text("host tmp\n")
    try:
        out = _run(_box(world), f"ls /tmp; cat {host}; echo inside > {made}; cat {made}")
    finally:
        host.unlink()
    assert "host tmp" not in out and "No such file" in out
    assert "inside" in out  # /tmp is writable in there...
    assert not made.exists()  # ...and gone with the command


def _landlock_tmp_is_private(world: dict[str, Path]) -> None:
    """Landlock: /tmp unreadable; TMPDIR (and HOME) a fresh directory, removed after the call."""
    host = Path("/tmp") / f"tilth-host-{os.getpid()}.txt"
    host.write_text("host tmp\n")
    try:
        out = _run(
            _box(world),
            f'cat {host}; echo inside > "$TMPDIR/x"; cat "$TMPDIR/x"; '
            'echo "tmp=$TMPDIR home=$HOME"',
        )
    finally:
        host.unlink()
    assert "host tmp" not in out and "Permission denied" in out
    assert "inside" in out
    tmp = out.split("tmp=")[1].split()[0]
    assert tmp.startswith("/") and f"home={tmp}" in out
    assert not Path(tmp).exists()  # gone with the command


def test_own_pid_namespace_hides_the_parent_environment(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    if str(world["backend"]) == "landlock":
        return _landlock_refuses_the_parents_proc(world)
    monkeypatch.setenv("TILTH_API_KEY", "sk-parent-key-123456")
    out = _run(
        _box(world),
        "echo ppid=$PPID; tr '\\0' '\\n' < /proc/$PPID/environ | rev; "
        "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | rev; ps -e -o pid= | wc -l",
    )
    assert "ppid=1" in out
    assert "sk-parent-key" not in out and "654321-yek-tnerap-ks" not in out
    assert str(os.getpid()) not in out.split("[exit")[0].splitlines()[0]


def _landlock_refuses_the_parents_proc(world: dict[str, Path]) -> None:
    """Landlock: no capability left (root included), so no ``/proc/<outside>/environ``."""
    out = _run(
        _box(world),
        f"grep -E '^Cap(Eff|Bnd)' /proc/self/status; cat /proc/$PPID/environ; "
        f"cat /proc/{os.getpid()}/environ; cat /proc/{os.getpid()}/mem; kill -0 {os.getpid()}",
    )
    assert out.count("0000000000000000") == 2, out
    assert out.count("Permission denied") >= 3, out
    if landlock.abi_version() >= 6:
        assert "Operation not permitted" in out  # signals scoped
    assert "TILTH" not in out and "PATH=" not in out


def test_timeout_kills_everything_in_the_sandbox(world: dict[str, Path]) -> None:
    marker = f"{300 + os.getpid() % 1000}.25"
    box = _box(world, timeout=1.5)
    outcome = box.dispatch("bash", {"command": f"sleep {marker} & sleep {marker}"})
    assert outcome.is_error and "timed out" in outcome.result
    deadline = time.monotonic() + 10
    while _sleepers(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _sleepers(marker) == []


def _sleepers(marker: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline[:2] == [b"sleep", marker.encode()]:
            found.append(proc.name)
    return found


def test_network_off_cuts_it(world: dict[str, Path]) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        connect = f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>&1 && echo CONNECTED"
        cut = _run(_box(world, network=False), connect)
        kept = _run(_box(world, network=True), connect)
    finally:
        listener.close()
    assert "CONNECTED" not in cut and "CONNECTED" in kept
    if str(world["backend"]) == "bwrap":
        out = _run(_box(world, network=False), "cat /proc/net/dev | wc -l; ls /sys/class/net")
        assert out.split("\n")[0].strip() == "3"  # header lines + loopback only


def test_settings_choose_the_sandbox(tmp_path: Path) -> None:
    require_backend("bwrap")
    require_backend("landlock")
    world = {"home": tmp_path / "home", "ws": tmp_path / "ws", "session": tmp_path / "s"}
    world["ws"].mkdir()
    world["source"] = tmp_path / "src"
    env = {"TILTH_HOME": str(world["home"])}
    assert sandbox_for(load_settings({**env, "TILTH_SANDBOX": "off"}), world["ws"]) is None
    auto = sandbox_for(
        load_settings(env), world["ws"], session_dir=world["session"], source=world["source"]
    )
    assert auto is not None and auto.network
    assert world["session"].resolve() in auto.hidden and world["home"].resolve() in auto.hidden
    off = load_settings({**env, "TILTH_SANDBOX_NETWORK": "off"})
    assert sandbox_for(off, world["ws"]) is not None
    assert not sandbox_for(off, world["ws"]).network  # type: ignore[union-attr]
    usable, detail = sandbox_status(load_settings(env))
    assert usable and "bubblewrap" in detail
    chosen = sandbox_for(load_settings({**env, "TILTH_SANDBOX": "landlock"}), world["ws"])
    assert chosen is not None and chosen.backend == "landlock" and chosen.abi >= 1


def test_chat_style_directory_keeps_its_git_read_only(tmp_path: Path, backend: str) -> None:
    work = tmp_path / "dir"
    (work / ".git").mkdir(parents=True)
    (work / ".git" / "config").write_text("[core]\n")
    (work / "src").mkdir()
    (work / "a.txt").write_text("old\n")
    box = ToolBox(work, sandbox=make_sandbox(work, backend=backend))
    out = _run(
        box, "echo a > a.txt; echo b > src/b.txt; echo x >> .git/config; rm -rf .git; echo rc=$?"
    )
    assert "rc=1" in out
    assert (work / "a.txt").read_text() == "a\n"
    assert (work / "src" / "b.txt").read_text() == "b\n"
    assert (work / ".git" / "config").read_text() == "[core]\n"


def test_required_without_bubblewrap_takes_landlock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: no user namespaces here' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    require_backend("landlock")
    settings = load_settings({"TILTH_HOME": str(tmp_path), "TILTH_SANDBOX": "required"})
    usable, detail = sandbox_status(settings)
    assert usable and detail.startswith("Landlock ABI")
    # Landlock takes over where bubblewrap cannot start; naming bubblewrap refuses.
    auto = sandbox_for(load_settings({"TILTH_HOME": str(tmp_path)}), tmp_path)
    assert auto is not None and auto.backend == "landlock"
    named = load_settings({"TILTH_HOME": str(tmp_path), "TILTH_SANDBOX": "bwrap"})
    with pytest.raises(SandboxUnavailable, match="TILTH_SANDBOX=bwrap"):
        sandbox_for(named, tmp_path)


def test_bad_settings_are_one_line_errors() -> None:
    from tilth.errors import ConfigError

    with pytest.raises(
        ConfigError, match="TILTH_SANDBOX must be one of auto, bwrap, landlock, required, off"
    ):
        load_settings({"TILTH_HOME": "/tmp/x", "TILTH_SANDBOX": "maybe"})
    with pytest.raises(ConfigError, match="TILTH_SANDBOX_NETWORK must be one of on, off"):
        load_settings({"TILTH_HOME": "/tmp/x", "TILTH_SANDBOX_NETWORK": "yes"})


def test_state_inside_the_writable_directory_stays_hidden(tmp_path: Path, backend: str) -> None:
    """``tilth chat ~`` with TILTH_HOME=~/.tilth: the home is inside the writable DIR."""
    work = tmp_path / "me"
    home = work / ".tilth"
    (home / "sessions").mkdir(parents=True)
    (home / ".env").write_text("TILTH_API_KEY=sk-inside-dir\n")
    venv = work / ".venv"
    (venv / "bin").mkdir(parents=True)
    sandbox = make_sandbox(work, hidden=[home], readable=[venv], backend=backend)
    box = ToolBox(work, sandbox=sandbox)
    out = _run(box, "cat .tilth/.env; ls -a .tilth; touch .venv/bin/new && echo venv-writable")
    assert "sk-inside-dir" not in out
    assert "No such file" in out or "Permission denied" in out
    assert "venv-writable" in out and (venv / "bin" / "new").exists()


def test_the_worktree_git_file_cannot_be_repointed(tmp_path: Path, backend: str) -> None:
    """A worktree's ``.git`` names the repository Tilth commits to: read-only (bubblewrap)
    or put back after the call (Landlock)."""
    work = tmp_path / "wt"
    work.mkdir()
    pointer = "gitdir: /somewhere/.git/worktrees/wt\n"
    (work / ".git").write_text(pointer)
    box = ToolBox(work, sandbox=make_sandbox(work, backend=backend))
    _run(box, "echo 'gitdir: /tmp/evil' > .git; rm -f .git; echo 'gitdir: /tmp/evil' > .git")
    assert (work / ".git").read_text() == pointer
    _run(box, "rm -f .git && mkdir .git && echo '[core]' > .git/config")
    assert (work / ".git").is_file() and (work / ".git").read_text() == pointer


def test_a_refusal_by_a_fixed_directory_says_what_is_allowed(tmp_path: Path, backend: str) -> None:
    """Under Landlock a directory holding ``.git`` keeps only read rights on itself (rights
    hold beneath the directory they are granted on, and ``.git`` must stay read-only), so
    bash cannot create or remove entries right in it: a bare "Permission denied" left a
    model retrying the same command. Bubblewrap has no such limit."""
    work = tmp_path / "dir"
    (work / ".git").mkdir(parents=True)
    (work / "src").mkdir()
    box = ToolBox(work, sandbox=make_sandbox(work, backend=backend))
    out = _run(box, "touch new.txt && touch src/b.txt")
    assert (work / "src" / "b.txt").exists() == (backend == "bwrap"), out
    if backend == "bwrap":
        assert (work / "new.txt").exists() and "[tilth]" not in out, out
        return
    assert not (work / "new.txt").exists()
    assert "Permission denied" in out and "[tilth] this sandbox (Landlock" in out, out
    assert "files in the top directory but not create, rename or remove entries" in out, out
    assert "write_file" in out
    deeper = _run(box, "touch src/c.txt; ls /nonexistent-dir")
    assert (work / "src" / "c.txt").exists() and "[tilth]" not in deeper, deeper


def test_a_virtualenv_whose_python_lives_in_a_home_directory_runs_in_the_sandbox(
    tmp_path: Path, backend: str
) -> None:
    """Landlock shows only what it is told: a project virtualenv made from a Python that
    lives outside the system directories (pyenv, uv, conda under ``~``) could not import its
    standard library, and the gate failed "Failed to import the site module". Its
    installation is now among the environment's readable places, for both kinds that name it
    (the virtualenv; a test command starting it)."""
    import venv

    from tilth.environment.project import ProjectEnv

    made = tmp_path / "project-venv"
    venv.EnvBuilder(symlinks=True).create(made)
    python = made / "bin" / "python"
    real = python.resolve()
    installation = real.parent.parent
    by_venv = ProjectEnv("source-venv", "a venv", venv=made, bin_dir=python.parent, python=python)
    by_command = ProjectEnv("command", "a command", command=f"{python} -m pytest {{files}}")
    for env in (by_venv, by_command):
        if real.parent.name == "bin" and (installation / "lib").is_dir():
            assert installation in env.readable_paths(), (env.kind, env.readable_paths())
    work = tmp_path / "work"
    work.mkdir()
    sandbox = make_sandbox(work, readable=by_venv.readable_paths(), backend=backend)
    out = _run(ToolBox(work, sandbox=sandbox), f"{python} -c 'import json, site; print(42)'")
    assert out.startswith("42"), out
