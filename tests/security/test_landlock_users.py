"""Landlock keeps Tilth's environment out of reach for root (capabilities dropped) and for a
normal user alike.

As root, a Landlock-confined process could still read ``/proc/<parent>/environ``: the
launcher empties the capability bounding set (tests/tools/test_sandbox.py checks it in
this process, which CI runs as root). A normal user is tested here by switching to
``nobody`` with ``setpriv`` (util-linux) when the tests run as root; the same script
without a sandbox is the control that shows what would leak.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import tilth
from security.conftest import require_backend

SECRET = "sk-normal-user-secret-4f1d"
NOBODY = 65534

SCRIPT = """
import os, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from tilth.tools import ToolBox
from tilth.tools.sandbox import make_sandbox
ws, backend, secret_file = Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
sandbox = None if backend == "off" else make_sandbox(ws, backend=backend)
command = (
    "echo uid=$(id -u); tr '\\\\0' '\\\\n' < /proc/$PPID/environ; "
    f"tr '\\\\0' '\\\\n' < /proc/{os.getpid()}/environ; cat {secret_file}"
)
print(ToolBox(ws, sandbox=sandbox).dispatch("bash", {"command": command}).result)
"""


@pytest.fixture
def stage() -> Iterator[Path]:
    """A world-readable copy of the package, a workspace and a home ``nobody`` owns."""
    root = Path(tempfile.mkdtemp(prefix="tilth-users-"))
    try:
        root.chmod(0o755)
        shutil.copytree(Path(tilth.__file__).parent, root / "lib" / "tilth")
        (root / "run.py").write_text(SCRIPT)
        for place in ("ws", "home"):
            (root / place).mkdir()
        (root / "home" / "secret.txt").write_text(f"{SECRET}\n")
        for current, dirs, files in os.walk(root):
            for name in [*dirs, *files]:
                os.chmod(os.path.join(current, name), 0o755)
        if os.geteuid() == 0:
            for place in ("ws", "home"):
                os.chown(root / place, NOBODY, NOBODY)
                for child in (root / place).iterdir():
                    os.chown(child, NOBODY, NOBODY)
            (root / "home").chmod(0o700)
            (root / "home" / "secret.txt").chmod(0o600)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _python() -> str:
    """An interpreter ``nobody`` can run, again from itself (Tilth starts its launcher with
    ``sys.executable``; Tilth's own may live under root's home)."""
    again = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'pass'], check=True)"
    for candidate in (sys.executable, "/usr/bin/python3", shutil.which("python3") or ""):
        if not candidate:
            continue
        tried = subprocess.run([*_as_user(), candidate, "-c", again], capture_output=True, cwd="/")
        if tried.returncode == 0:
            return candidate
    pytest.fail("no Python interpreter the unprivileged user can run")


def _as_user() -> list[str]:
    if os.geteuid() != 0:
        return []  # already a normal user
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("setpriv (util-linux) is needed to test as a normal user")
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def _run(stage: Path, backend: str) -> str:
    argv = [*_as_user(), _python(), str(stage / "run.py"), str(stage / "lib")]
    argv += [str(stage / "ws"), backend, str(stage / "home" / "secret.txt")]
    env = {"PATH": "/usr/bin:/bin", "TILTH_API_KEY": SECRET, "HOME": str(stage / "home")}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_normal_user_under_landlock_reads_no_parent_environment(stage: Path) -> None:
    require_backend("landlock")
    confined = _run(stage, "landlock")
    assert f"uid={os.geteuid() if os.geteuid() else NOBODY}" in confined
    assert SECRET not in confined
    assert confined.count("Permission denied") >= 3, confined
    # The control: the same user, unconfined, reads Tilth's environment and the file (the
    # launcher, its parent, holds no environment and is not dumpable either way).
    assert _run(stage, "off").count(SECRET) == 2
