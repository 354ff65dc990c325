"""The lock files through which porter processes sharing a machine's GPUs time one kernel at a time per GPU.

Where :data:`LOCKS_ENV` names a folder (``porter port --suite`` sets it for the programs it runs side by side),
each GPU has a lock file there, named after its :attr:`~porter.backends.Device.physical` identity (the CUDA and
the OpenCL view of one GPU share it).  A timing child holds it exclusively from loading its kernel to its last
timed launch (:func:`exclusive`, with the descriptor its parent opened: :func:`opened`), so two timings never
overlap on one GPU, while their compiles and driver starts do.

The other work of a suite's programs on the GPU (replays, sanitizer passes, the programs' own runs) takes no
lock: holding the GPU shared around each of those, so that a timing would have the GPU to itself, was measured
on an H100 (docs/BENCHMARKS.md, eleventh session) and stalled the suite -- a timing waiting for a program's
40-second run held every other program's GPU work behind it -- so a time taken beside such work is marked
contended instead (porter.harness.contention).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator

LOCKS_ENV = "PORTER_DEVICE_LOCKS"


def folder() -> str:
    return os.environ.get(LOCKS_ENV, "")


def path_of(physical: str) -> str:
    """The lock file of the device `physical` names, in :data:`LOCKS_ENV`'s folder ("" where none is set)."""
    return os.path.join(folder(), re.sub(r"[^A-Za-z0-9._-]", "_", physical) + ".lock") if folder() else ""


def lockers(physical: str, table: str = "/proc/locks") -> set[int]:
    """The processes that hold the device's lock file or wait for it (the kernel's lock table, /proc/locks):
    timing children, of this porter or of another program of a suite.  None of them runs a kernel on the
    device while a timing holds the lock, so the driver's list of the device's processes names them without
    their contending with it.  Empty where no lock folder is set, or the table cannot be read."""
    path = path_of(physical)
    if not path:
        return set()
    try:
        st = os.stat(path)
        with open(table, encoding="ascii", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return set()
    mine = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    found: set[int] = set()
    for line in lines:
        # "1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF", a waiter's with "->" before FLOCK
        fields = [f for f in line.split()[1:] if f != "->"]
        if len(fields) < 5 or fields[0] != "FLOCK":
            continue
        where = fields[4].split(":")
        try:
            major, minor, inode, pid = int(where[0], 16), int(where[1], 16), int(where[2]), int(fields[3])
        except (ValueError, IndexError):
            continue
        if (major, minor, inode) == mine:
            found.add(pid)
    return found


@contextlib.contextmanager
def opened(physical: str) -> Iterator[int | None]:
    """The lock file of the device `physical` names, open and not held (None where :data:`LOCKS_ENV` names
    no folder, or one that cannot be used); closed afterwards."""
    if not folder():
        yield None
        return
    path = path_of(physical)
    try:
        os.makedirs(folder(), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def exclusive(fd: int | None) -> Iterator[None]:
    """Hold the device's lock file `fd` exclusively (a timing child, from its kernel's load to its last
    timed launch); nothing to hold for None."""
    if fd is None:
        yield
        return
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


__all__ = ["LOCKS_ENV", "exclusive", "folder", "lockers", "opened", "path_of"]
