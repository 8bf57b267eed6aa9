"""The sandbox tests and their backends (bubblewrap, Landlock): in CI each must work and
they fail loudly without it; elsewhere they skip with the reason shown (``-ra`` prints it).

``TEST_SANDBOXES`` (comma-separated, default ``bwrap,landlock``; not a ``TILTH_*`` name,
which the test set-up clears) names the backends to test: ``.ci/run`` runs the suite a
second time with bubblewrap hidden from ``PATH`` and ``landlock`` alone, for the tests
marked ``sandbox_backend`` (those whose result depends on the backend: each test using the
``backend`` fixture or ``MATRIX_PARAMS`` is, and a test running a command in the sandbox
``auto`` picks carries the mark itself).

The attack suite (``test_attacks.py``), where the backend is the point, runs once per backend
in ``BACKENDS``; every other backend-parametrized test (the ``backend`` fixture, ``MATRIX``)
runs under the first one only, as ``.ci/run``'s second pass runs them under Landlock.
``TEST_SANDBOX_MATRIX=all`` runs them under every backend in one pass.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tilth.tools import sandbox_landlock
from tilth.tools.sandbox import probe

BACKENDS = tuple(
    name.strip()
    for name in os.environ.get("TEST_SANDBOXES", "bwrap,landlock").split(",")
    if name.strip()
)

MATRIX = BACKENDS if os.environ.get("TEST_SANDBOX_MATRIX") == "all" else BACKENDS[:1]
"""The backends a backend-parametrized test outside the attack suite runs under."""

MATRIX_PARAMS = [pytest.param(name, marks=pytest.mark.sandbox_backend) for name in MATRIX]
"""``MATRIX`` as parameters marked ``sandbox_backend``: a test (or fixture) parametrized with
them is one whose result depends on the backend, so ``.ci/run``'s Landlock pass runs it again;
its ``off`` case or a test that names its backend outright runs once, in ``make test``."""


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require_backend(backend: str) -> None:
    """Skip (visibly) or, under CI=true, fail when ``backend`` cannot confine a command here."""
    if backend == "off":
        return
    if backend not in BACKENDS:  # a pass for the other backend (.ci/run runs both)
        pytest.skip(f"{backend} not under test here (TEST_SANDBOXES={','.join(BACKENDS)})")
    if backend == "bwrap":
        usable, detail = probe()
    else:
        usable, detail, _ = sandbox_landlock.probe()
    if usable:
        return
    if _in_ci():
        pytest.fail(f"CI must run the {backend} sandbox tests, but it is unavailable: {detail}")
    pytest.skip(f"{backend} sandbox unavailable on this machine: {detail}")


def require_sandbox() -> None:
    """The first backend under test must work (the tests that name none use ``auto``)."""
    require_backend(BACKENDS[0] if BACKENDS else "bwrap")


@pytest.fixture
def sandbox_usable() -> None:
    require_sandbox()


@pytest.fixture(params=MATRIX_PARAMS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each backend of ``MATRIX``, usable here (or the test skips / fails in CI)."""
    name = str(request.param)
    require_backend(name)
    return name


def path_without_bwrap(where: Path) -> str:
    """A ``PATH`` that finds every program the current one does, except ``bwrap``: each
    directory holding a ``bwrap`` is replaced by links to everything else in it."""
    where.mkdir(parents=True, exist_ok=True)
    entries: list[str] = []
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.exists(os.path.join(directory, "bwrap")):
            entries.append(directory)
            continue
        if str(where) not in entries:
            entries.append(str(where))
        for name in os.listdir(directory):
            link = where / name
            if name != "bwrap" and not os.path.lexists(link):
                link.symlink_to(Path(directory) / name)
    path = os.pathsep.join(entries)
    assert shutil.which("bwrap", path=path) is None
    return path


def backend_env(backend: str, where: Path) -> dict[str, str]:
    """Settings under which ``auto`` picks ``backend``: Landlock when bwrap is not on PATH."""
    if backend == "landlock":
        return {"PATH": path_without_bwrap(where), "TILTH_SANDBOX": "auto"}
    return {"TILTH_SANDBOX": backend}


@pytest.fixture(autouse=True)
def no_key_in_any_session_file(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every security test: no file Tilth left under ``$TILTH_HOME`` (sessions, their
    worktrees, snapshots) holds the test API key (SPEC §3, the secret filter)."""
    if "tilth_home" not in request.fixturenames:
        yield
        return
    from agent.support import API_KEY

    # Asked for first, so it is torn down after this check.
    home: Path = request.getfixturevalue("tilth_home")
    yield
    found = []
    for here, dirs, files in os.walk(home):
        if "HEAD" in files and "objects" in dirs:
            # A git directory's object store is zlib-compressed: no key shows there as text.
            dirs.remove("objects")
        for name in files:
            path = Path(here) / name
            if name == ".env" or not stat.S_ISREG(path.lstat().st_mode):
                continue
            if _holds(path, API_KEY.encode()):
                found.append(str(path.relative_to(home)))
    assert found == [], f"the API key was written to {found}"


def _holds(path: Path, needle: bytes, chunk: int = 1 << 20) -> bool:
    """Whether ``path`` holds ``needle``, read a chunk at a time and only where it has data: a
    test's 3 GB sparse file must not raise this worker's peak memory (a later test's child
    inherits it as ``ru_maxrss``), nor cost seconds of reading zeros (its holes)."""
    with open(path, "rb") as handle:
        for start, end in _data_extents(handle.fileno(), os.fstat(handle.fileno()).st_size):
            handle.seek(start)
            tail, left = b"", end - start
            while left > 0 and (block := handle.read(min(chunk, left))):
                if needle in tail + block:
                    return True
                tail, left = block[-len(needle) :], left - len(block)
    return False


def _data_extents(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """The ``(start, end)`` ranges of ``fd`` that hold data; a hole reads as zeros, which no
    key contains. The whole file where the file system cannot tell."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as error:
            if error.errno != errno.ENXIO:  # ENXIO: no data after offset
                yield offset, size
            return
        offset = os.lseek(fd, start, os.SEEK_HOLE)
        yield start, offset
