"""The worker's ``bash`` inside a sandbox (Linux): bubblewrap, else Landlock.

With bubblewrap, a ``Sandbox`` turns the command's argv into a ``bwrap`` argv: the whole filesystem
read-only, one directory writable (the worktree, or ``tilth chat``'s DIR), the
session directory and ``$TILTH_HOME`` invisible (an empty tmpfs over each), a
private ``/tmp``, its own PID namespace with a fresh ``/proc`` (no parent
``/proc/<pid>/environ`` to read), the repository's ``.git`` read-only (no
``git config``, no hooks), a new terminal session (no ``TIOCSTI``), and death with
its parent. The environment is whatever the caller passes to ``Popen`` — the
``bash`` tool's scrubbed one — so the sandbox adds no secret and removes none.

With Landlock (``backend="landlock"``: no package, no user namespace) the command
starts through ``launcher()``: capabilities dropped, ``no_new_privs``, a Landlock
ruleset (``tilth.tools.sandbox_landlock``) and a private ``TMPDIR``; the same places are
writable, readable and hidden, with the home directory and ``/tmp`` unreadable besides.

``sandbox_status`` probes once per process which backend works here; ``sandbox_for``
applies ``TILTH_SANDBOX=auto|bwrap|landlock|required|off`` to that answer.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tilth.config import Settings
from tilth.errors import ConfigError
from tilth.tools import sandbox_landlock
from tilth.tools.launcher import CONTAINED, Launcher

if TYPE_CHECKING:
    from tilth.session.store import Session  # only for a type: the tools run without it

PROBE_TIMEOUT = 15.0
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
)

_probed: dict[str, tuple[bool, str]] = {}


class SandboxUnavailable(ConfigError):
    """``TILTH_SANDBOX=required`` (or a named backend) but none it accepts works here."""


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
    worktree virtualenv, which the gate runs; the ``.git`` of each repository inside)."""
    scratch: tuple[Path, ...] = ()
    """Private directories outside the writable one the command may also write (the gate's
    report), each bound at its own path."""
    backend: str = "bwrap"
    """``bwrap`` (``wrap`` gives the bubblewrap argv) or ``landlock`` (``launcher`` confines)."""
    abi: int = 0
    """The kernel's Landlock ABI (``landlock`` only)."""

    def launcher(self) -> Launcher:
        """How the wrapped command starts: contained always, confined with Landlock."""
        if self.backend != "landlock":
            return CONTAINED  # bubblewrap's PID namespace ends the rest with the call
        pointer = self.writable / ".git"
        ruleset = sandbox_landlock.ruleset(
            writable=self.writable,
            readable=self.readable,
            hidden=self.hidden,
            protected=self.protected(),
            scratch=self.scratch,
            network=self.network,
            abi=self.abi,
        )
        keep = (pointer,) if pointer.is_file() and not pointer.is_symlink() else ()
        return Launcher(ruleset, private_tmp=True, keep=keep)

    def protected(self) -> list[Path]:
        """Paths inside the writable directory that stay read-only: its ``.git``, and
        ``read_only`` (a project environment there stays writable unless named in it:
        ``tilth chat`` lets a person's model install packages into DIR's own ``.venv``).
        """
        paths = [self.writable / ".git", *self.read_only]
        return [p for p in paths if _inside(p, self.writable) and p.exists()]

    def fixed_directories(self) -> list[Path]:
        """Landlock only: the directories in which bash cannot create, rename or remove an
        entry. Landlock only grants, and a right on a directory holds beneath it, so each
        directory holding a place that must stay read-only or hidden (``.git``, the gate's
        virtualenv, ``$TILTH_HOME``) is granted entry by entry around it and keeps only read
        rights on itself (``sandbox_landlock.carve``); bubblewrap has no such limit."""
        if self.backend != "landlock":
            return []
        places = [p for p in self.protected() if p.is_dir() and not p.is_symlink()]
        places += [p for p in self.hidden if p != self.writable and _inside(p, self.writable)]
        found: list[Path] = []
        for place in places:
            directory = place.parent
            while _inside(directory, self.writable):
                if directory not in found:
                    found.append(directory)
                if directory == self.writable:
                    break
                directory = directory.parent
        return found

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the sandbox, its working directory the writable root
        (Landlock: ``argv`` itself; ``launcher()`` confines it)."""
        if self.backend == "landlock":
            return list(argv)
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


NOT_SEARCHED = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", ".tox"})
"""Directories never searched for a repository inside (large, and never a person's repo)."""
SEARCH_LIMIT = 200_000
"""Directory entries looked at, at most, when searching for repositories inside."""


def nested_git_dirs(root: Path) -> list[Path]:
    """The ``.git`` directories of repositories inside ``root`` (not its own): kept
    read-only like ``root``'s, or a hook planted there would run unconfined at the
    person's next ``git commit`` in that repository (``tilth chat`` in a directory of
    several repositories)."""
    found: list[Path] = []
    pending, seen = [str(root)], 0
    while pending and seen < SEARCH_LIMIT:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            continue
        seen += len(entries)
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=False) or entry.name in NOT_SEARCHED:
                    continue
            except OSError:
                continue
            if os.path.isdir(os.path.join(entry.path, ".git")):
                found.append(Path(entry.path) / ".git")
            pending.append(entry.path)
    return found


def make_sandbox(
    writable: Path,
    *,
    hidden: Iterable[Path] = (),
    readable: Iterable[Path] = (),
    network: bool = True,
    read_only: Iterable[Path] = (),
    backend: str = "bwrap",
) -> Sandbox:
    """A ``Sandbox`` with every path resolved (bubblewrap mounts real paths, not symlinks;
    Landlock rules hold real places)."""
    bwrap = shutil.which("bwrap") or "bwrap"
    root = _real(writable)
    # Looked for once, here: a search of a large directory before every call would cost
    # each call milliseconds (16 ms at 10k files).
    inner = nested_git_dirs(root)
    return Sandbox(
        root,
        tuple(_real(p) for p in hidden),
        tuple(_real(p) for p in readable),
        network,
        bwrap,
        (*(_real(p) for p in read_only), *inner),
        backend=backend,
        abi=sandbox_landlock.probe(network)[2] if backend == "landlock" else 0,
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


def choose_backend(settings: Settings) -> tuple[str | None, str]:
    """``(backend, detail)`` under ``TILTH_SANDBOX``: ``bwrap``, ``landlock``, or None and why.

    ``auto`` and ``required`` take bubblewrap where it can make a sandbox, else Landlock;
    ``bwrap`` and ``landlock`` take only that one. Each backend is probed once per process.
    """
    mode = settings.sandbox
    if mode == "off":
        return None, "off (TILTH_SANDBOX=off): the worker's bash runs unsandboxed"
    reasons: list[str] = []
    if mode in ("auto", "required", "bwrap"):
        usable, detail = probe()
        if usable:
            network = "network on" if settings.sandbox_network else "network off"
            return "bwrap", f"bubblewrap: {detail}, {network}"
        reasons.append(detail)
    if mode in ("auto", "required", "landlock"):
        usable, detail, _ = sandbox_landlock.probe(settings.sandbox_network)
        if usable:
            return "landlock", detail
        reasons.append(detail)
    return None, "; ".join(reasons)


def sandbox_status(settings: Settings) -> tuple[bool, str]:
    """``(usable, detail)``: will the worker's ``bash`` run sandboxed under these settings?"""
    backend, detail = choose_backend(settings)
    return backend is not None, detail


def sandbox_limits(settings: Settings) -> list[str]:
    """The promises the chosen sandbox cannot hold on this kernel (Landlock below ABI 6)."""
    backend, _ = choose_backend(settings)
    if backend != "landlock":
        return []
    abi = sandbox_landlock.probe(settings.sandbox_network)[2]
    from tilth.tools.landlock import promises

    return [m for m in promises(abi, settings.sandbox_network)[1] if "ABI" in m]


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
    kept read-only. ``required``, ``bwrap`` and ``landlock`` raise ``SandboxUnavailable``
    when no backend they accept works here; ``auto`` returns None and the caller warns.
    """
    if settings.sandbox == "off":
        return None
    backend, detail = choose_backend(settings)
    if backend is None:
        if settings.sandbox != "auto":
            raise SandboxUnavailable(
                f"TILTH_SANDBOX={settings.sandbox} but the sandbox is unavailable: {detail}",
                hint=f"{INSTALL_HINT}, or set TILTH_SANDBOX=auto to run unsandboxed",
            )
        return None
    hidden = [settings.home, settings.sessions_dir, *_runtime_dirs()]
    if session_dir is not None:
        hidden.append(session_dir)
    # Tilth's own interpreter may run the gate; it stays reachable wherever it is installed.
    shown = [*readable, Path(sys.prefix)]
    if backend == "landlock":
        shown.append(Path(sys.base_prefix))  # bubblewrap shows it with the whole system
    if source is not None:
        shown += [source, source / ".git"]
    return make_sandbox(
        writable,
        hidden=hidden,
        readable=shown,
        network=settings.sandbox_network,
        read_only=read_only,
        backend=backend,
    )


def confinement(settings: Settings, session: Session) -> Callable[[Path], Sandbox | None]:
    """The worker's sandbox for a command Tilth runs in one of ``session``'s worktrees (the
    set-up command of a fork or a re-made worktree: it runs the worker's files)."""
    return lambda worktree: sandbox_for(
        settings, worktree, session_dir=session.dir, source=session.source
    )
