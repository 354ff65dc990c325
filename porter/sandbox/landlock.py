"""Landlock (Linux >= 5.13) through its three system calls: a process limits its own file-system access.

No maintained Python binding exists (the PyPI `landlock` package is a pre-release), and the interface
is three system calls and two structs, so they are called through ctypes here.  Rules only ever
narrow: every :func:`restrict` adds a layer, and a layer can never be lifted by the process or its
children (``no_new_privs`` is set first, as the kernel requires).

ABI versions add rights: 2 REFER, 3 TRUNCATE, 4 TCP bind/connect, 5 device ioctl, 6 scopes (abstract
unix sockets, signals to processes outside the domain).  Each right the running kernel knows is
handled; the ones it does not know are left out, so a rule set is valid on every kernel with Landlock.
"""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Iterable
from pathlib import Path

# x86_64 and aarch64 share these numbers (the generic table).
_SYS = {"create_ruleset": 444, "add_rule": 445, "restrict_self": 446}
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE  # the rights a rule on a non-directory may hold


class LandlockError(OSError):
    pass


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The Landlock ABI the running kernel offers; 0 when it has none (or it is disabled)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    rc = _libc().syscall(_SYS["create_ruleset"], None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    return int(rc) if rc > 0 else 0


def _write_rights(abi: int) -> int:
    rights = (
        WRITE_FILE
        | REMOVE_DIR
        | REMOVE_FILE
        | MAKE_CHAR
        | MAKE_DIR
        | MAKE_REG
        | MAKE_SOCK
        | MAKE_FIFO
        | MAKE_BLOCK
        | MAKE_SYM
    )
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    return rights


def restrict(readable: Iterable[str | Path], writable: Iterable[str | Path], *, scope: bool = True) -> int:
    """Limit this process (and every process it starts) to reading and executing beneath `readable`,
    and reading and writing beneath `writable`; with ABI 4, no TCP bind or connect at all; with ABI 6
    and `scope`, no signals to and no abstract sockets of processes outside.  Paths that do not exist
    are skipped.  Returns the ABI used; raises LandlockError when the kernel refuses."""
    abi = abi_version()
    if abi <= 0:
        raise LandlockError("Landlock is not available in this kernel")
    libc = _libc()
    write = _write_rights(abi)
    attr = _RulesetAttr(READ | write, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0, 0)
    if abi >= 6 and scope:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 16 if abi >= 4 else 8
    fd = libc.syscall(_SYS["create_ruleset"], ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if fd < 0:
        raise LandlockError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        for paths, rights in ((readable, READ), (writable, READ | write)):
            for path in paths:
                _add(libc, fd, str(path), rights)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise LandlockError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_SYS["restrict_self"], fd, 0) != 0:
            err = ctypes.get_errno()
            raise LandlockError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(fd)
    return abi


def _add(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    try:
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path that does not exist grants nothing
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS
        rule = _PathBeneathAttr(rights, target)
        if libc.syscall(_SYS["add_rule"], ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            err = ctypes.get_errno()
            raise LandlockError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
    finally:
        os.close(target)
