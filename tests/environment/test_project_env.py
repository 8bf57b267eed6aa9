"""The project's environment (SPEC §5.4): resolution order, the pre-flight, ``bash`` inside it."""

from __future__ import annotations

import os
import sys
import venv
from pathlib import Path

import pytest

from tilth.config import Settings
from tilth.environment.project import ProjectEnv, check_project_env, resolve_project_env
from tilth.errors import ProjectEnvError
from tilth.tools import ToolBox


def settings(tmp_path: Path, **fields: object) -> Settings:
    return Settings(home=tmp_path / "home", sessions_dir=tmp_path / "sessions", **fields)  # type: ignore[arg-type]


def make_venv(root: Path, name: str = ".venv") -> Path:
    """A real (pip-less) virtualenv: it starts, and it has no pytest."""
    venv.EnvBuilder(with_pip=False).create(root / name)
    return root / name


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    worktree, source = tmp_path / "worktree", tmp_path / "source"
    worktree.mkdir()
    source.mkdir()
    return worktree, source


def test_test_command_comes_first_and_takes_the_files(
    tmp_path: Path, roots: tuple[Path, Path]
) -> None:
    worktree, source = roots
    make_venv(worktree)
    env = resolve_project_env(worktree, source, settings(tmp_path, test_command="make t F={files}"))
    assert (env.kind, env.bin_dir, env.venv) == ("command", None, None)
    run = env.pytest_invocation(["tests/test_t001_a b.py", "tests/test_t002_c.py"])
    assert run.shell and run.args == "make t F='tests/test_t001_a b.py' tests/test_t002_c.py"
    appended = ProjectEnv("command", "", command="nox -s tests --")
    assert appended.pytest_invocation(["t.py"]).args == "nox -s tests -- t.py"


def test_the_worktree_venv_beats_the_source_venv(tmp_path: Path, roots: tuple[Path, Path]) -> None:
    worktree, source = roots
    source_venv = make_venv(source, "venv")
    env = resolve_project_env(worktree, source, settings(tmp_path))
    assert (env.kind, env.venv) == ("source-venv", source_venv)
    assert env.pytest_invocation(["t.py"]).args[:3] == [
        str(source_venv / "bin" / "python"),
        "-m",
        "pytest",
    ]
    worktree_venv = make_venv(worktree)
    env = resolve_project_env(worktree, source, settings(tmp_path))
    assert (env.kind, env.venv, env.bin_dir) == (
        "worktree-venv",
        worktree_venv,
        worktree_venv / "bin",
    )


def test_uv_when_the_project_has_a_lock_and_uv_is_on_path(
    tmp_path: Path, roots: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    worktree, source = roots
    (worktree / "uv.lock").write_text("version = 1\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "uv").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "uv").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    env = resolve_project_env(worktree, source, settings(tmp_path))
    assert env.kind == "uv"
    assert env.pytest_invocation(["t.py"]).args[:4] == ["uv", "run", "python", "-m"]
    check_project_env(env, worktree)


def test_a_python3_on_path_with_pytest_is_the_last_resort(
    tmp_path: Path, roots: tuple[Path, Path]
) -> None:
    worktree, source = roots
    env = resolve_project_env(worktree, source, settings(tmp_path))
    # The tests' PATH starts with a project interpreter outside Tilth's installation.
    assert env.kind == "python"
    assert env.python is not None and not str(env.python).startswith(sys.prefix)
    check_project_env(env, worktree)


def test_tilths_own_interpreter_is_never_chosen(
    tmp_path: Path, roots: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    worktree, source = roots
    # Only Tilth's own bin dir on PATH (it has python3 and pytest): still no environment.
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    os.symlink(sys.prefix, source / ".venv")  # a source "venv" that is Tilth's installation
    with pytest.raises(ProjectEnvError) as caught:
        resolve_project_env(worktree, source, settings(tmp_path))
    error = caught.value
    assert error.exit_code == 2 and "\n" not in error.message
    assert "Tilth's own installation" in error.message
    assert "Tilth's own interpreter" in error.message
    assert error.hint and "TILTH_TEST_COMMAND" in error.hint and "TILTH_SETUP_COMMAND" in error.hint


def test_nothing_usable_names_everything_tried(
    tmp_path: Path, roots: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    worktree, source = roots
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(ProjectEnvError) as caught:
        resolve_project_env(worktree, source, settings(tmp_path))
    message = caught.value.message
    for tried in ("TILTH_TEST_COMMAND (unset)", str(worktree), str(source), "no uv.lock"):
        assert tried in message
    assert "python3 on PATH (none found)" in message


def test_the_preflight_names_a_missing_program_and_a_missing_pytest(
    tmp_path: Path, roots: tuple[Path, Path]
) -> None:
    worktree, source = roots
    missing = ProjectEnv("command", "", command="FOO=1 no-such-runner-xyz {files}")
    with pytest.raises(ProjectEnvError, match="runs `no-such-runner-xyz`, which is not found"):
        check_project_env(missing, worktree)
    check_project_env(ProjectEnv("command", "", command="cd sub && whatever"), worktree)
    check_project_env(ProjectEnv("command", "", command="python3 -m pytest"), worktree)
    check_project_env(ProjectEnv("command", "", command="$HOME/bin/runner {files}"), worktree)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(tmp_path))
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "runner").write_text("#!/bin/sh\n")
        check_project_env(ProjectEnv("command", "", command="~/bin/runner {files}"), worktree)
        with pytest.raises(ProjectEnvError, match="runs `~/bin/nope`"):
            check_project_env(ProjectEnv("command", "", command="~/bin/nope {files}"), worktree)
    bare = make_venv(source)
    env = resolve_project_env(worktree, source, settings(tmp_path))
    with pytest.raises(ProjectEnvError) as caught:
        check_project_env(env, worktree)
    assert "pytest is not installed in source repository's virtualenv" in caught.value.message
    assert caught.value.hint and f"{bare}/bin/pip install pytest" in caught.value.hint


def test_bash_runs_with_the_environment_active(tmp_path: Path, roots: tuple[Path, Path]) -> None:
    worktree, source = roots
    project = make_venv(worktree)
    env = resolve_project_env(worktree, source, settings(tmp_path))
    box = ToolBox(worktree, environment=env)
    out = box.dispatch("bash", {"command": 'command -v python; echo "VENV=$VIRTUAL_ENV"'}).result
    assert f"{project}/bin/python" in out
    assert f"VENV={project}" in out
    active = env.activate({"PATH": f"/usr/bin{os.pathsep}{project}/bin", "PYTHONHOME": "/x"})
    assert active["PATH"] == f"{project}/bin{os.pathsep}/usr/bin"
    assert "PYTHONHOME" not in active


def test_tilths_own_venv_first_on_path_does_not_hide_another_venv(
    tmp_path: Path, roots: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import site

    worktree, source = roots
    # Two symlinked venvs share one base interpreter binary; only their prefixes differ.
    other = tmp_path / "other-venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(other)
    (site_dir,) = other.glob("lib/python*/site-packages")
    (site_dir / "with-pytest.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    assert (other / "bin" / "python3").resolve() == Path(sys.executable).resolve()
    # Tilth's bin dir first (an activated Tilth venv), then the project's venv.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{other / 'bin'}")
    env = resolve_project_env(worktree, source, settings(tmp_path))
    assert env.kind == "python" and env.python == other / "bin" / "python3"


def test_a_probe_is_asked_once_until_a_package_is_installed(
    tmp_path: Path, roots: tuple[Path, Path]
) -> None:
    """Choosing and pre-flighting an interpreter start it once; installing pytest into it
    (its site-packages changes) is seen by the next check without restarting Tilth."""
    worktree, _ = roots
    project = make_venv(tmp_path, "project")
    starts = tmp_path / "starts.log"
    wrapper = tmp_path / "bin" / "python3"
    wrapper.parent.mkdir()
    # A real interpreter behind a script that notes every start.
    wrapper.write_text(f'#!/bin/sh\necho start >> {starts}\nexec {project}/bin/python "$@"\n')
    wrapper.chmod(0o755)
    env = ProjectEnv("python", "the wrapper", bin_dir=wrapper.parent, python=wrapper)
    for _ in range(3):
        with pytest.raises(ProjectEnvError, match="pytest is not installed"):
            check_project_env(env, worktree)
    assert starts.read_text().count("start") == 1
    (site_dir,) = project.glob("lib/python*/site-packages")
    (site_dir / "pytest.py").write_text("")  # "installs" pytest
    check_project_env(env, worktree)
    check_project_env(env, worktree)
    assert starts.read_text().count("start") == 2
    (site_dir / "pytest.py").unlink()
    with pytest.raises(ProjectEnvError, match="pytest is not installed"):
        check_project_env(env, worktree)


FINDER = """
import importlib.util, sys


class _Finder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name in MAPPING:
            init = MAPPING[name] + "/__init__.py"
            return importlib.util.spec_from_file_location(name, init)
        return None


def install():
    sys.meta_path.append(_Finder)
"""


def _project_copy(root: Path, value: str) -> None:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "__init__.py").write_text(f"VALUE = {value!r}\n")
    (root / "flat").mkdir()
    (root / "flat" / "__init__.py").write_text(f"VALUE = {value!r}\n")


def test_an_editable_install_in_the_source_venv_reads_the_worktrees_code(
    tmp_path: Path, roots: tuple[Path, Path]
) -> None:
    """The usual set-up: the repository's .venv has the project installed with `pip install
    -e .`, which points at the repository's own files. In a session the tests and the
    worker's bash must import the worktree's code, or no change the worker makes is seen."""
    worktree, source = roots
    _project_copy(source, "source")
    _project_copy(worktree, "worktree")
    project = make_venv(source)
    (site_dir,) = project.glob("lib/python*/site-packages")
    # What pip writes for a src layout (a path .pth), and for a flat one (a setuptools finder).
    (site_dir / "__editable__.pkg-0.1.pth").write_text(f"{source / 'src'}\n")
    (site_dir / "__editable__.flat-0.1.pth").write_text(
        "import __editable___flat_finder; __editable___flat_finder.install()\n"
    )
    (site_dir / "__editable___flat_finder.py").write_text(
        f"MAPPING: dict[str, str] = {{'flat': {str(source / 'flat')!r}}}\n{FINDER}"
    )
    env = resolve_project_env(worktree, source, settings(tmp_path))
    box = ToolBox(tmp_path, environment=env)  # not the worktree: only the path can tell
    out = box.dispatch(
        "bash", {"command": "python -c 'import pkg, flat; print(pkg.VALUE, flat.VALUE)'"}
    ).result
    assert "worktree worktree" in out, out
    assert env.kind == "source-venv" and "editable" in env.description
