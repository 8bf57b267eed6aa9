"""Run a command as on a kernel without Landlock: its three system calls fail with ENOSYS.

``python no_landlock.py PROGRAM ARGS...`` installs a seccomp filter (what a container
runtime's profile does) and execs the program.
"""

from __future__ import annotations

import ctypes
import os
import sys

_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_ENOSYS = 38


class _Filter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def main() -> None:
    program = (_Filter * 5)(
        _Filter(0x20, 0, 0, 0),  # load the system call number
        _Filter(0x35, 0, 2, 444),  # below landlock_create_ruleset: allow
        _Filter(0x25, 1, 0, 446),  # above landlock_restrict_self: allow
        _Filter(0x06, 0, 0, 0x00050000 | _ENOSYS),  # the three Landlock calls: ENOSYS
        _Filter(0x06, 0, 0, 0x7FFF0000),  # allow
    )
    prog = _Program(len(program), program)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "no_new_privs")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp")
    os.execvp(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
