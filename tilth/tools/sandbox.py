"""The worker's ``bash`` inside a bubblewrap sandbox (Linux).

A ``Sandbox`` turns the command's argv into a ``bwrap`` argv: the whole filesystem
read-only, one directory writable (the worktree, or ``tilth chat``'s DIR), the
session directory and ``$TILTH_HOME`` invisible (an empty tmpfs over each), a
private ``/tmp``, its own PID namespace with a fresh ``/proc`` (no parent
``/proc/<pid>/environ`` to read), the repository's ``.git`` read-only (no
``git config``, no hooks), a new terminal session (no ``TIOCSTI``), and death with
its parent. The environment is whatever the caller passes to ``Popen`` — the
``bash`` tool's scrubbed one — so the sandbox adds no secret and removes none.

``sandbox_status`` probes once per process whether bubblewrap works here;
``sandbox_for`` applies ``TILTH_SANDBOX=auto|required|off`` to that answer.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tilth.config import Settings
from tilth.errors import ConfigError

PROBE_TIMEOUT = 15.0
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
)

_probed: dict[str, tuple[bool, str]] = {}


class SandboxUnavailable(ConfigError):
    """``TILTH_SANDBOX=required`` but bubblewrap cannot make a sandbox on this machine."""


def _real(path: Path) -> Path:
    return path.expanduser().resolve()


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


@dataclass(frozen=True)
class Sandbox:
    """How one shell command is confined; ``wrap`` gives the ``bwrap`` argv."""

    writable: Path
    """The one place the command may write (resolved)."""
    hidden: tuple[Path, ...] = ()
    """Directories replaced by an empty tmpfs (session dir, ``$TILTH_HOME``...)."""
    readable: tuple[Path, ...] = ()
    """Paths shown read-only even when they lie under a hidden place or ``/tmp``."""
    network: bool = True
    bwrap: str = "bwrap"
    read_only: tuple[Path, ...] = ()
    """Paths inside the writable directory kept read-only besides its ``.git`` (a run's
    worktree virtualenv, which the gate runs)."""
    scratch: tuple[Path, ...] = ()
    """Private directories outside the writable one the command may also write (the gate's
    report), each bound at its own path."""

    def protected(self) -> list[Path]:
        """Paths inside the writable directory that stay read-only: its ``.git``, and
        ``read_only`` (a project environment there stays writable unless named in it:
        ``tilth chat`` lets a person's model install packages into DIR's own ``.venv``).
        """
        paths = [self.writable / ".git", *self.read_only]
        return [p for p in paths if _inside(p, self.writable) and p.exists()]

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the sandbox, its working directory the writable root."""
        args = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev"]
        args += ["--unshare-pid", "--unshare-ipc", "--proc", "/proc", "--tmpfs", "/tmp"]
        for path in sorted(set(self.hidden), key=lambda p: len(p.parts)):
            if path.is_dir() and path != Path("/"):
                args += ["--tmpfs", str(path)]
        # A readable path holding a hidden one (a repository at ~ with TILTH_HOME=~/.tilth)
        # would un-hide it: such a path stays as the read-only root shows it.
        hidden = [*self.hidden, Path("/tmp")]
        outside = [
            p
            for p in self.readable
            if not _inside(p, self.writable) and not any(_inside(h, p) for h in hidden)
        ]
        for path in sorted(set(outside), key=lambda p: len(p.parts)):
            if path.exists():
                args += ["--ro-bind", str(path), str(path)]
        args += ["--bind", str(self.writable), str(self.writable)]
        for path in self.scratch:
            args += ["--bind", str(path), str(path)]
        for path in sorted(set(self.hidden), key=lambda p: len(p.parts)):
            # Hidden places inside the writable one (`tilth chat ~` with TILTH_HOME=~/.tilth)
            # were re-exposed by its bind: hide them again.
            if path != self.writable and _inside(path, self.writable) and path.is_dir():
                args += ["--tmpfs", str(path)]
        for path in self.protected():
            args += ["--ro-bind", str(path), str(path)]
        shown = [*outside, self.writable]
        for path in bound_sockets():
            # Under a hidden place (or /tmp) a socket is gone anyway, unless a bind shows it.
            if any(_inside(path, p) for p in shown) or not any(_inside(path, h) for h in hidden):
                args += ["--ro-bind", "/dev/null", str(path)]
        if not self.network:
            args.append("--unshare-net")
        # ~/.cache is read-only in here; caches (pip, uv...) go to the private /tmp instead.
        args += ["--setenv", "XDG_CACHE_HOME", "/tmp/.cache"]
        args += ["--die-with-parent", "--new-session", "--chdir", str(self.writable), "--"]
        return args + list(argv)


def bound_sockets(table: Path = Path("/proc/net/unix")) -> list[Path]:
    """Unix sockets bound at a path right now (the services a sandbox must not reach).

    A read-only mount does not stop ``connect()``: the session bus would run commands
    outside (``systemd-run --user``), a Docker socket is root. Each is covered with an
    empty file in the sandbox; sockets made later in ``$XDG_RUNTIME_DIR`` are hidden with it.
    """
    try:
        lines = table.read_text(encoding="utf-8", errors="replace").splitlines()[1:]
    except OSError:
        return []
    found: set[Path] = set()
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) == 8 and fields[7].startswith("/"):
            path = Path(fields[7])
            try:
                if stat.S_ISSOCK(os.lstat(path).st_mode):
                    found.add(path)
            except OSError:
                continue
    return sorted(found)


def make_sandbox(
    writable: Path,
    *,
    hidden: Iterable[Path] = (),
    readable: Iterable[Path] = (),
    network: bool = True,
    read_only: Iterable[Path] = (),
) -> Sandbox:
    """A ``Sandbox`` with every path resolved (bubblewrap mounts real paths, not symlinks)."""
    bwrap = shutil.which("bwrap") or "bwrap"
    return Sandbox(
        _real(writable),
        tuple(_real(p) for p in hidden),
        tuple(_real(p) for p in readable),
        network,
        bwrap,
        tuple(_real(p) for p in read_only),
    )


def probe(bwrap: str | None = None) -> tuple[bool, str]:
    """Whether bubblewrap can make this module's sandbox here, and what was found (cached)."""
    if not sys.platform.startswith("linux"):
        return False, f"bubblewrap sandboxing needs Linux (this is {sys.platform})"
    path = bwrap or shutil.which("bwrap")
    if path is None:
        return False, "bwrap (bubblewrap) is not installed"
    if path in _probed:
        return _probed[path]
    with tempfile.TemporaryDirectory(prefix="tilth-sandbox-probe-") as scratch:
        trial = Sandbox(_real(Path(scratch)), bwrap=path).wrap(["/bin/sh", "-c", "exit 0"])
        try:
            done = subprocess.run(
                trial,
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            done = None
            result = (False, f"{path} could not be started: {exc}")
    if done is not None:
        if done.returncode == 0:
            version = subprocess.run(
                [path, "--version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT
            ).stdout.strip()
            result = (True, f"{version or 'bubblewrap'} ({path})")
        else:
            why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            result = (False, f"{path} cannot make a sandbox here: {why}")
    _probed[path] = result
    return result


def sandbox_status(settings: Settings) -> tuple[bool, str]:
    """``(usable, detail)``: will the worker's ``bash`` run sandboxed under these settings?"""
    if settings.sandbox == "off":
        return False, "off (TILTH_SANDBOX=off): the worker's bash runs unsandboxed"
    usable, detail = probe()
    network = "network on" if settings.sandbox_network else "network off"
    return (True, f"{detail}, {network}") if usable else (False, detail)


def unsandboxed_warning(detail: str) -> str:
    """The one loud line ``auto`` prints when it has to run without the sandbox."""
    return (
        f"the worker's bash runs WITHOUT a sandbox: {detail}. It can read and write "
        f"anything your user can; {INSTALL_HINT}, or set TILTH_SANDBOX=required to refuse"
    )


def _runtime_dirs() -> list[Path]:
    """The user's runtime directories: their session bus, agents and sockets live there."""
    places = [Path(f"/run/user/{os.getuid()}")]
    if os.environ.get("XDG_RUNTIME_DIR", "").startswith("/"):
        places.append(Path(os.environ["XDG_RUNTIME_DIR"]))
    return [p for p in places if p.is_dir()]


def sandbox_for(
    settings: Settings,
    writable: Path,
    *,
    session_dir: Path | None = None,
    source: Path | None = None,
    readable: Iterable[Path] = (),
    read_only: Iterable[Path] = (),
) -> Sandbox | None:
    """The sandbox for a bash tool writing only ``writable``; None when it runs unsandboxed.

    ``session_dir`` (hidden) and ``source`` (its ``.git`` and files shown read-only)
    are optional: ``tilth chat`` has neither. ``read_only`` are paths inside ``writable``
    kept read-only. ``required`` raises ``SandboxUnavailable`` when bubblewrap cannot be
    used; ``auto`` returns None and the caller warns.
    """
    if settings.sandbox == "off":
        return None
    usable, detail = sandbox_status(settings)
    if not usable:
        if settings.sandbox == "required":
            raise SandboxUnavailable(
                f"TILTH_SANDBOX=required but the sandbox is unavailable: {detail}",
                hint=f"{INSTALL_HINT}, or set TILTH_SANDBOX=auto to run unsandboxed",
            )
        return None
    hidden = [settings.home, settings.sessions_dir, *_runtime_dirs()]
    if session_dir is not None:
        hidden.append(session_dir)
    # Tilth's own interpreter may run the gate; it stays reachable wherever it is installed.
    shown = [*readable, Path(sys.prefix)]
    if source is not None:
        shown += [source, source / ".git"]
    return make_sandbox(
        writable,
        hidden=hidden,
        readable=shown,
        network=settings.sandbox_network,
        read_only=read_only,
    )
