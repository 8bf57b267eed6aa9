"""Landlock and capabilities through ``ctypes``: what the kernel offers, and confining oneself.

Three system calls (``landlock_create_ruleset`` 444, ``landlock_add_rule`` 445,
``landlock_restrict_self`` 446, the same number on every architecture) and a few
``prctl``/``capset`` calls. No binding from PyPI: the ones there are pre-releases or 0.x
projects that cover neither the ABI 6 scopes nor dropping capabilities, and this code runs
in a forked child between ``fork`` and ``exec``, where only already-loaded, lock-free code
belongs. ``confine`` is that child's whole job; everything else runs in the parent.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

# The launcher loads this module before each call: it imports nothing slow (no pathlib,
# no dataclasses), so a spare launcher is ready soon after the previous call.

# Filesystem rights, by the ABI that introduced them.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

READ = EXECUTE | READ_FILE | READ_DIR
"""What a read-only place grants: list, read, run."""
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
"""The rights a rule on a file (not a directory) may carry."""
DEVICE = READ_FILE | WRITE_FILE | IOCTL_DEV

_SYS_CREATE, _SYS_ADD, _SYS_RESTRICT = 444, 445, 446
_CREATE_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP, _PR_CAP_AMBIENT = 38, 24, 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAP_VERSION_3 = 0x20080522


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


_LIBC = _libc()


def _syscall(number: int, *args: object) -> int:
    assert _LIBC is not None
    result = int(_LIBC.syscall(ctypes.c_long(number), *args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI (0: none — not Linux, too old, disabled or filtered out)."""
    if _LIBC is None:
        return 0
    try:
        return _syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_VERSION))
    except OSError:
        return 0


def fs_rights(abi: int) -> int:
    """Every filesystem right the kernel with this ABI knows (and so can refuse)."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def _last_capability() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return 63


LAST_CAP = _last_capability()


class Grant:
    """One rule: ``rights`` on ``path`` and everything beneath it."""

    __slots__ = ("follow", "path", "rights")

    def __init__(self, path: str, rights: int, follow: bool = True) -> None:
        self.path = path
        self.rights = rights
        self.follow = follow
        """Open through a symbolic link (system places such as ``/lib``); the rules found
        inside a writable directory never follow one."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Grant) and (self.path, self.rights, self.follow) == (
            other.path,
            other.rights,
            other.follow,
        )

    def __hash__(self) -> int:
        return hash((self.path, self.rights, self.follow))

    def __repr__(self) -> str:
        return f"Grant({self.path!r}, {self.rights:#x}, follow={self.follow})"


class Ruleset:
    """What a confined process may reach, ready to apply (no filesystem work left)."""

    __slots__ = ("abi", "grants", "network")

    def __init__(self, grants: tuple[Grant, ...], abi: int, network: bool = True) -> None:
        self.grants = grants
        self.abi = abi
        self.network = network
        """False: TCP bind and connect refused (ABI 4+)."""

    def handled(self) -> tuple[int, int, int]:
        """``(fs, net, scoped)`` access the ruleset takes charge of."""
        net = NET_BIND_TCP | NET_CONNECT_TCP if not self.network and self.abi >= 4 else 0
        scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL if self.abi >= 6 else 0
        return fs_rights(self.abi), net, scoped


def drop_privileges() -> None:
    """``no_new_privs``, then every capability gone: bounding set, ambient, and the sets.

    As root with its capabilities, a Landlock-confined process could still read
    ``/proc/<parent>/environ``; with the bounding set empty the exec'd program gets none
    back. Without ``CAP_SETPCAP`` (a normal user) the bounding set cannot shrink, and
    needs not: with ``no_new_privs`` such a process gains nothing at exec.
    """
    assert _LIBC is not None
    if _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"no_new_privs: {os.strerror(code)}")
    for cap in range(LAST_CAP + 1):
        _LIBC.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM for a normal user: fine
    _LIBC.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    if _LIBC.capset(ctypes.byref(header), data) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"capset: {os.strerror(code)}")


def confine(ruleset: Ruleset, writable: Iterable[str] = ()) -> None:
    """Restrict the calling process (and all it will exec or fork) to ``ruleset``.

    ``writable`` adds places made after the ruleset was planned (the call's private
    temporary directory). A path that is gone is skipped; any other failure raises.
    """
    fs, net, scoped = ruleset.handled()
    attr = _RulesetAttr(fs, net, scoped)
    fd = _syscall(_SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0)
    try:
        extra = tuple(Grant(p, fs) for p in writable)
        for grant in (*ruleset.grants, *extra):
            _add(fd, grant, fs)
        drop_privileges()
        _syscall(_SYS_RESTRICT, fd, 0)
    finally:
        os.close(fd)


def _add(ruleset_fd: int, grant: Grant, handled: int) -> None:
    flags = os.O_PATH | os.O_CLOEXEC | (0 if grant.follow else os.O_NOFOLLOW)
    try:
        fd = os.open(grant.path, flags)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.ELOOP):
            return
        raise
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISLNK(mode):
            return
        rights = grant.rights & handled
        if not stat.S_ISDIR(mode):
            rights &= FILE_RIGHTS
        if rights:
            attr = _PathBeneath(rights, fd)
            _syscall(_SYS_ADD, ruleset_fd, _RULE_PATH_BENEATH, ctypes.byref(attr), 0)
    finally:
        os.close(fd)


def promises(abi: int, network: bool) -> tuple[list[str], list[str]]:
    """What a Landlock sandbox holds on this ABI, and what it cannot (for doctor and warnings)."""
    held = ["files", "capabilities dropped"]
    missing: list[str] = []
    if abi >= 4:
        held.append("TCP" if not network else "TCP can be cut (TILTH_SANDBOX_NETWORK=off)")
    if not network:
        missing.append(
            "UDP and other protocols stay open" if abi >= 4 else "network not cut (ABI < 4)"
        )
    if abi >= 6:
        held.append("signals and abstract sockets scoped")
    else:
        missing.append("signals and abstract unix sockets not scoped (ABI < 6)")
    if abi < 3:
        missing.append("truncate not controlled (ABI < 3)")
    missing.append("connect() to unix sockets bound at a path")
    missing.append(
        "bash creating or removing entries right in a directory that holds .git or the "
        "gate's virtualenv (bubblewrap allows it)"
    )
    return held, missing
