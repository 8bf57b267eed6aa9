"""The Landlock backend: which places a confined command may read and write, and a probe.

Landlock rules only grant, and a right on a directory holds for everything beneath it.
So a place that must stay hidden or read-only *inside* a granted one (a ``.git``
directory or the gate's virtualenv inside the worktree, ``$TILTH_HOME`` inside a
repository) is carved out by granting the enclosing directory's entries one by one
instead, down to the exception; the enclosing directory itself then keeps only what
the exception allows (listing and reading, or nothing), so bash cannot create or
remove entries directly in it. A worktree's ``.git`` *file* is not carved out: the
launcher puts it back after each call instead.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from tilth.tools import landlock
from tilth.tools.landlock import Grant, Ruleset

SYSTEM = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/sys",
    "/proc",
    "/snap",
    "/nix",
    "/run/systemd/resolve",
)
"""Read-only everywhere: the system's programs, libraries and configuration."""
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
"""The only devices a command may open: never a disk, which root could read raw."""

_probed: dict[bool, tuple[bool, str, int]] = {}


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def carve(path: Path, rights: int, exceptions: Sequence[tuple[Path, int]]) -> list[Grant]:
    """``rights`` on ``path``, less what each exception beneath it (place, rights kept) allows."""
    for place, kept in exceptions:
        if place == path:
            rights &= kept
    if not rights:
        return []
    inner = [(p, k) for p, k in exceptions if p != path and _inside(p, path)]
    if not inner or not path.is_dir() or path.is_symlink():
        return [Grant(str(path), rights, follow=not inner)]
    # The directory itself keeps only what every exception below it allows, read at most.
    own = rights & landlock.READ
    for _, kept in inner:
        own &= kept
    grants = [Grant(str(path), own, follow=False)] if own else []
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError:
        return grants
    for entry in entries:
        if entry.is_symlink():
            continue  # never a rule through a link the command could have planted
        grants += [
            Grant(g.path, g.rights, follow=False) for g in carve(Path(entry.path), rights, inner)
        ]
    return grants


def ruleset(
    *,
    writable: Path,
    readable: Iterable[Path],
    hidden: Iterable[Path],
    protected: Iterable[Path],
    scratch: Iterable[Path],
    network: bool,
    abi: int,
) -> Ruleset:
    """What a command confined to ``writable`` may reach (paths resolved by the caller)."""
    everything = landlock.fs_rights(abi)
    exceptions = [(Path(p), 0) for p in hidden]
    # A protected directory stays readable; a protected file is put back by the launcher.
    exceptions += [(Path(p), landlock.READ) for p in protected if Path(p).is_dir()]
    grants: list[Grant] = []
    resolv = Path("/etc/resolv.conf")
    system = [*SYSTEM, str(resolv.resolve()) if resolv.is_symlink() else ""]
    for place in [*map(Path, filter(None, system)), *readable]:
        if place.exists():
            grants += carve(place, landlock.READ, exceptions)
    for place in (writable, *scratch):
        grants += carve(place, everything, exceptions)
    grants.append(Grant("/dev", landlock.READ_DIR))
    grants += [Grant(d, landlock.DEVICE) for d in DEVICES if os.path.exists(d)]
    return Ruleset(tuple(grants), abi, network)


def probe(network: bool = True) -> tuple[bool, str, int]:
    """``(usable, detail, abi)``: can a Landlock-confined command run here (cached)."""
    if network in _probed:
        return _probed[network]
    abi = landlock.abi_version()
    if abi == 0:
        result = (False, "Landlock is not available (Linux 5.13+ with Landlock enabled)", 0)
    else:
        result = _trial(abi, network)
    _probed[network] = result
    return result


def _trial(abi: int, network: bool) -> tuple[bool, str, int]:
    """One confined ``/bin/sh -c 'exit 0'`` through the launcher."""
    from tilth import proc
    from tilth.tools.launcher import Launcher

    with tempfile.TemporaryDirectory(prefix="tilth-landlock-probe-") as scratch:
        rules = ruleset(
            writable=Path(scratch).resolve(),
            readable=(),
            hidden=(),
            protected=(),
            scratch=(),
            network=network,
            abi=abi,
        )
        with tempfile.TemporaryFile() as out:
            try:
                code, _ = proc.run_into(
                    ["/bin/sh", "-c", "exit 0"],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd=scratch,
                    timeout=15.0,
                    launch=Launcher(rules, private_tmp=True),
                )
            except OSError as exc:
                return False, f"a Landlock-confined command could not start: {exc}", abi
            out.seek(0)
            said = out.read().decode("utf-8", "replace").strip()
    if code != 0:
        why = said.splitlines()[-1] if said else f"exit {code}"
        return False, f"Landlock could not confine a command here: {why}", abi
    return True, describe(abi, network), abi


def describe(abi: int, network: bool) -> str:
    """One line: the backend, its ABI, what it holds and what it cannot."""
    held, missing = landlock.promises(abi, network)
    line = f"Landlock ABI {abi} (kernel {os.uname().release}): holds {', '.join(held)}"
    if missing:
        line += f"; cannot hold: {', '.join(missing)}"
    return line
